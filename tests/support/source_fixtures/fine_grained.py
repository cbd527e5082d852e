"""Tiny Stanford Cars, FGVC Aircraft, CUB-200-2011 and Stanford Dogs in their exact layouts."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from scipy.io import savemat

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar

CAR_CLASSES = ("AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Acura TL Sedan 2012")
CARS = [(1, 0), (2, 0), (3, 1), (1, 1), (2, 0), (3, 0)]  # (1-based class, test flag)


def write_stanford_cars(folder: Path) -> dict[str, tuple[str, str]]:
    """``car_ims.tgz`` of ``car_ims/NNNNNN.jpg`` and ``cars_annos.mat`` (a struct array)."""
    fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
    annotations = np.zeros((1, len(CARS)), dtype=[(f, "O") for f in fields])
    members, expected = {}, {}
    for i, (cls, test) in enumerate(CARS):
        name = f"car_ims/{i + 1:06d}.jpg"
        members[name] = image_bytes(40 + i, 30, seed=i, fmt="JPEG")
        box = [np.array([[v]], dtype=np.uint16) for v in (1, 2, 20, 15)]
        annotations[0, i] = (name, *box, np.array([[cls]], dtype=np.uint8), np.array([[test]], dtype=np.uint8))
        expected[name] = (CAR_CLASSES[cls - 1], "test" if test else "train")
    members["car_ims/999999.jpg"] = image_bytes(9, 9, fmt="JPEG")  # not annotated: not read
    write_tar(folder / "car_ims.tgz", members, compression="gz")
    names = np.empty((1, len(CAR_CLASSES)), dtype=object)
    names[0, :] = CAR_CLASSES
    savemat(folder / "cars_annos.mat", {"annotations": annotations, "class_names": names})
    return expected


FAMILIES = ("Boeing 707", "A300", "Cessna 172")


def write_fgvc_aircraft_family(folder: Path) -> dict[str, tuple[str, str]]:
    """``fgvc-aircraft-2013b/data``: images first, then the family lists and families.txt."""
    base = "fgvc-aircraft-2013b/data/"
    trainval = {"0034309": "A300", "0034958": "Boeing 707", "0037511": "Cessna 172", "0037512": "A300"}
    test = {"1025794": "Boeing 707", "1340192": "Cessna 172"}
    members: dict[str, bytes] = {}
    for i, image_id in enumerate([*trainval, *test, "2222222"]):
        members[f"{base}images/{image_id}.jpg"] = image_bytes(60 + i, 45, seed=i, fmt="JPEG")
    for part, ids in (("trainval", trainval), ("test", test), ("train", trainval)):
        members[f"{base}images_family_{part}.txt"] = "".join(f"{k} {v}\n" for k, v in ids.items()).encode()
    members[f"{base}images_variant_test.txt"] = b"1025794 707-320\n"
    members[f"{base}families.txt"] = ("\n".join(FAMILIES) + "\n").encode()
    write_tar(folder / "fgvc-aircraft-2013b.tar.gz", members, compression="gz")
    return {**{k: (v, "train") for k, v in trainval.items()}, **{k: (v, "test") for k, v in test.items()}}


CUB_CLASSES = ("001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross")


def write_caltech_birds2011(folder: Path) -> dict[str, tuple[str, str]]:
    """``CUB_200_2011.tgz`` (images, then images.txt, the split and classes.txt; attributes.txt
    outside the folder as in the real archive) and a ``segmentations.tgz``."""
    members: dict[str, bytes] = {"attributes.txt": b"1 has_bill_shape::curved\n"}
    images, splits, expected = [], [], {}
    for n in range(7):
        folder_name = CUB_CLASSES[n % 3]
        rel = f"{folder_name}/{folder_name.split('.')[1]}_{n:04d}_{n}.jpg"
        members[f"CUB_200_2011/images/{rel}"] = image_bytes(50 + n, 35, seed=n, fmt="JPEG")
        is_train = int(n % 2 == 0)
        images.append(f"{n + 1} {rel}")
        splits.append(f"{n + 1} {is_train}")
        expected[rel] = (folder_name.split(".")[1].lower(), "train" if is_train else "test")
    members["CUB_200_2011/images.txt"] = ("\n".join(images) + "\n").encode()
    members["CUB_200_2011/train_test_split.txt"] = ("\n".join(splits) + "\n").encode()
    members["CUB_200_2011/classes.txt"] = "".join(f"{i + 1} {c}\n" for i, c in enumerate(CUB_CLASSES)).encode()
    members["CUB_200_2011/bounding_boxes.txt"] = b"1 1.0 2.0 3.0 4.0\n"
    write_tar(folder / "CUB_200_2011.tgz", members, compression="gz")
    write_tar(folder / "segmentations.tgz", {"segmentations/x.png": image_bytes(4, 4)}, compression="gz")
    return expected


DOGS = {
    "n02085620-Chihuahua": (2, 1),
    "n02085782-Japanese_spaniel": (1, 2),
    "n02093256-Staffordshire_bullterrier": (2, 0),
}  # folder -> (train, test) images


def _mat_bytes(paths: list[str], labels: list[int]) -> bytes:
    buffer = io.BytesIO()
    cells = np.empty((len(paths), 1), dtype=object)
    cells[:, 0] = paths
    savemat(buffer, {"file_list": cells, "annotation_list": cells, "labels": np.array(labels, dtype=float)[:, None]})
    return buffer.getvalue()


def write_stanford_dogs(folder: Path) -> dict[str, tuple[str, str]]:
    """``images.tar`` (``Images/<folder>/<file>.jpg``), ``lists.tar`` (the three .mat lists)
    and ``annotation.tar``."""
    images: dict[str, bytes] = {}
    lists: dict[str, tuple[list[str], list[int]]] = {"train": ([], []), "test": ([], [])}
    expected = {}
    seed = 0
    for label, (breed, (train, test)) in enumerate(sorted(DOGS.items())):
        for part, count in (("train", train), ("test", test)):
            for _ in range(count):
                seed += 1
                rel = f"{breed}/{breed.split('-')[0]}_{seed}.jpg"
                images[f"Images/{rel}"] = image_bytes(30 + seed, 28, seed=seed, fmt="JPEG")
                lists[part][0].append(rel)
                lists[part][1].append(label + 1)
                expected[rel] = (breed.lower(), part)
    write_tar(folder / "images.tar", images)
    all_paths = lists["train"][0] + lists["test"][0]
    write_tar(
        folder / "lists.tar",
        {
            "file_list.mat": _mat_bytes(all_paths, lists["train"][1] + lists["test"][1]),
            "train_list.mat": _mat_bytes(*lists["train"]),
            "test_list.mat": _mat_bytes(*lists["test"]),
        },
    )
    write_tar(folder / "annotation.tar", {f"Annotation/{p[:-4]}": b"<annotation/>" for p in all_paths})
    return expected


__all__ = ["write_caltech_birds2011", "write_fgvc_aircraft_family", "write_stanford_cars", "write_stanford_dogs"]
