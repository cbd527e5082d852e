"""Tiny sources whose labels or splits are list files, in their exact layouts."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar, write_zip
from workers.ingest.readers.class_name_lists import class_names


def write_food101(folder: Path) -> dict[str, tuple[str, str]]:
    members: dict[str, bytes] = {"food-101/README.txt": b"Food-101", "food-101/license_agreement.txt": b"-"}
    train = ["takoyaki/1001", "takoyaki/1002", "pizza/2001", "apple_pie/3001"]
    test = ["pizza/2002", "apple_pie/3002"]
    for n, key in enumerate([*train, *test, "pizza/9999"]):
        members[f"food-101/images/{key}.jpg"] = image_bytes(30 + n, 26, seed=n, fmt="JPEG")
    members["food-101/meta/train.txt"] = ("\n".join(train) + "\n").encode()
    members["food-101/meta/test.txt"] = ("\n".join(test) + "\n").encode()
    members["food-101/meta/classes.txt"] = b"apple_pie\npizza\ntakoyaki\n"
    write_tar(folder / "food-101.tar.gz", members, compression="gz")
    return {**{k: (k.split("/")[0], "train") for k in train}, **{k: (k.split("/")[0], "test") for k in test}}


def write_tiny_imagenet(folder: Path) -> dict[str, tuple[str, str]]:
    root = "tiny-imagenet-200/"
    wnids = ["n02124075", "n01443537", "n04067472"]
    members: dict[str, bytes] = {
        root: b"",
        root + "wnids.txt": ("\n".join(wnids) + "\n").encode(),
        root + "words.txt": b"n01443537\tgoldfish\n",
    }
    expected = {}
    for w, wnid in enumerate(wnids):
        members[f"{root}train/{wnid}/{wnid}_boxes.txt"] = b"x"
        for i in range(2):
            members[f"{root}train/{wnid}/images/{wnid}_{i}.JPEG"] = image_bytes(64, 64, seed=10 * w + i, fmt="JPEG")
            expected[f"{wnid}_{i}"] = (wnid, "train")
    val = {"val_0.JPEG": "n04067472", "val_1.JPEG": "n01443537"}
    for name, wnid in val.items():
        members[f"{root}val/images/{name}"] = image_bytes(64, 64, seed=len(expected), fmt="JPEG")
        expected[name] = (wnid, "test")
    members[f"{root}val/val_annotations.txt"] = "".join(f"{n}\t{w}\t0\t0\t62\t62\n" for n, w in val.items()).encode()
    members[f"{root}test/images/test_0.JPEG"] = image_bytes(64, 64, seed=99, fmt="JPEG")
    write_zip(folder / "tiny-imagenet-200.zip", members)
    return expected


def write_german_tsr(folder: Path) -> dict[str, tuple[str, str]]:
    train: dict[str, bytes] = {}
    expected = {}
    for cls in (0, 2, 42):
        train[f"GTSRB/Final_Training/Images/{cls:05d}/GT-{cls:05d}.csv"] = b"Filename;ClassId\n"
        for i in range(2):
            name = f"GTSRB/Final_Training/Images/{cls:05d}/00000_{i:05d}.ppm"
            train[name] = image_bytes(29 + i, 31, seed=cls + i, fmt="PPM")
            expected[name] = (f"{cls:05d}", "train")
    write_zip(folder / "GTSRB_Final_Training_Images.zip", train)
    labels = {"00000.ppm": 42, "00001.ppm": 2, "00002.ppm": 0}
    test = {f"GTSRB/Final_Test/Images/{n}": image_bytes(40, 35, seed=i, fmt="PPM") for i, n in enumerate(labels)}
    test["GTSRB/Final_Test/Images/GT-final_test.test.csv"] = b"Filename;Width\n"
    write_zip(folder / "GTSRB_Final_Test_Images.zip", test)
    rows = ["Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId"]
    rows += [f"{n};40;35;5;5;30;30;{c}" for n, c in labels.items()]
    write_zip(folder / "GTSRB_Final_Test_GT.zip", {"GT-final_test.csv": ("\n".join(rows) + "\n").encode()})
    expected.update({n: (f"{c:05d}", "test") for n, c in labels.items()})
    return expected


def write_wiki_paintings_style(folder: Path) -> dict[str, tuple[str, str]]:
    """``wikiart.zip`` (``wikiart/<Style>/<file>.jpg``) and ``wikiart_csv.zip`` (the style,
    genre and artist CSVs, no header line: the first line is dropped as the reference does)."""
    names = class_names("wiki_paintings_style")
    train = [
        ("Impressionism/claude-monet_a.jpg", 12),
        ("Baroque/rembrandt_b.jpg", 4),
        ("Ukiyo_e/hokusai_c.jpg", 26),
        ("Baroque/rubens_d.jpg", 4),
    ]
    val = [("Cubism/picasso_e.jpg", 7), ("Impressionism/degas_f.jpg", 12)]
    images = {f"wikiart/{n}": image_bytes(36 + i, 24, seed=i, fmt="JPEG") for i, (n, _) in enumerate([*train, *val])}
    write_zip(folder / "wikiart.zip", images)
    csv = {
        f"style_{part}.csv": "".join(f"{n},{c}\n" for n, c in rows).encode()
        for part, rows in (("train", train), ("val", val))
    }
    csv["genre_train.csv"] = b"Baroque/rembrandt_b.jpg,6\n"
    write_zip(folder / "wikiart_csv.zip", csv)
    return {**{n: (names[c], "train") for n, c in train[1:]}, **{n: (names[c], "test") for n, c in val[1:]}}


def write_oxford_iiit_pet(folder: Path) -> dict[str, tuple[str, str]]:
    """``images.tar.gz`` is an uncompressed tar, as the real one; annotations has lists,
    trimaps and xmls."""
    names = class_names("oxford_iiit_pet")
    trainval = [("Abyssinian_1", 1, 1), ("Abyssinian_2", 1, 1), ("beagle_10", 5, 2)]
    test = [("Abyssinian_3", 1, 1), ("beagle_11", 5, 2)]
    images = {
        f"images/{n}.jpg": image_bytes(33 + i, 21, seed=i, fmt="JPEG") for i, (n, _, _) in enumerate([*trainval, *test])
    }
    images["images/Abyssinian_1.mat"] = b"MATLAB"
    write_tar(folder / "images.tar.gz", images)
    lists = {
        part: "".join(f"{n} {c} {s} {1}\n" for n, c, s in rows)
        for part, rows in (("trainval", trainval), ("test", test))
    }
    write_tar(
        folder / "annotations.tar.gz",
        {
            "annotations/README": b"readme",
            "annotations/list.txt": b"#x\n",
            "annotations/trainval.txt": lists["trainval"].encode(),
            "annotations/test.txt": lists["test"].encode(),
            "annotations/trimaps/Abyssinian_1.png": image_bytes(4, 4),
        },
        compression="gz",
    )
    return {**{n: (names[c - 1], "train") for n, c, _ in trainval}, **{n: (names[c - 1], "test") for n, c, _ in test}}


__all__ = [
    "write_food101",
    "write_german_tsr",
    "write_oxford_iiit_pet",
    "write_tiny_imagenet",
    "write_wiki_paintings_style",
]
