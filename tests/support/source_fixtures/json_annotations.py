"""A tiny Caltech Camera Traps (ECCV'18) source: an images tar and COCO-style JSON files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar, write_zip

CATEGORIES = [
    {"id": 1, "name": "opossum"},
    {"id": 30, "name": "empty"},
    {"id": 6, "name": "bobcat"},
    {"id": 33, "name": "car"},
]
PARTS = {  # file -> (split, {image id: category id})
    "train_annotations.json": ("train", {"5968c0f9-a": 1, "59f5fe2b-b": 30, "59f5fe2b-c": 6}),
    "trans_val_annotations.json": ("val", {"5a0b1c2d-d": 33}),
    "trans_test_annotations.json": ("test", {"5a1b2c3d-e": 30, "5a1b2c3d-f": 1}),
}


def write_caltech_camera_traps(folder: Path) -> dict[str, tuple[str, str]]:
    names = {c["id"]: c["name"] for c in CATEGORIES}
    members, expected = {}, {}
    jsons: dict[str, bytes] = {}
    for n, (file, (split, labels)) in enumerate(PARTS.items()):
        annotations = [{"id": f"a{i}", "image_id": k, "category_id": v} for i, (k, v) in enumerate(labels.items())]
        doc = {
            "info": {},
            "categories": CATEGORIES,
            "annotations": annotations,
            "images": [{"id": k, "file_name": f"{k}.jpg"} for k in labels],
        }
        jsons[f"eccv_18_annotation_files/{file}"] = json.dumps(doc).encode()
        for i, (image_id, category) in enumerate(labels.items()):
            members[f"eccv_18_all_images_sm/{image_id}.jpg"] = image_bytes(24, 16 + i, seed=10 * n + i, fmt="JPEG")
            expected[image_id] = (names[category], split)
    members["eccv_18_all_images_sm/unlabelled-z.jpg"] = image_bytes(8, 8, fmt="JPEG")
    jsons["eccv_18_annotation_files/cis_val_annotations.json"] = b"{}"
    write_tar(folder / "eccv_18_all_images_sm.tar.gz", members, compression="gz")
    write_tar(folder / "eccv_18_annotations.tar.gz", jsons, compression="gz")
    return expected


COCO_CATEGORIES = [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}, {"id": 90, "name": "toothbrush"}]


def write_coco_single_label(folder: Path) -> dict[str, tuple[str, str, tuple[int, int]]]:
    """train2017 / val2017 zips of 64x48 JPEGs and their instance annotations: small boxes
    (< 16 px) are left out, a box past the image edge is clipped."""
    expected = {}
    names = {c["id"]: c["name"] for c in COCO_CATEGORIES}
    boxes = {  # part -> {image id: [(bbox, category)]}
        "train2017": {9: [([1.5, 2.0, 20.0, 30.0], 1), ([10, 10, 8, 40], 3)], 25: [([40, 20, 50, 40], 90)]},
        "val2017": {139: [([0, 0, 16, 16], 3), ([5, 5, 30, 15.9], 1)]},
    }
    tables = {}
    for part, images in boxes.items():
        members = {f"{part}/": b""}
        doc = {"images": [], "annotations": [], "categories": COCO_CATEGORIES}
        for image_id, annotations in images.items():  # noqa: F402
            file_name = f"{image_id:012d}.jpg"
            members[f"{part}/{file_name}"] = image_bytes(64, 48, seed=image_id, fmt="JPEG")
            doc["images"].append({"id": image_id, "file_name": file_name, "width": 64, "height": 48})
            for n, (bbox, category) in enumerate(annotations):
                doc["annotations"].append(
                    {"id": 1000 * image_id + n, "image_id": image_id, "bbox": bbox, "category_id": category}
                )
                x, y, w, h = bbox
                if w >= 16 and h >= 16:
                    x1, y1 = min(64, x + w), min(48, y + h)
                    extent = (round(y1) - round(y), round(x1) - round(x))
                    expected[f"{image_id}/{n}"] = (names[category], "train" if part == "train2017" else "test", extent)
        write_zip(folder / f"{part}.zip", members)
        tables[f"annotations/instances_{part}.json"] = json.dumps(doc).encode()
    tables["annotations/captions_train2017.json"] = b"{}"
    write_zip(folder / "annotations_trainval2017.zip", tables)
    write_zip(folder / "test2017.zip", {"test2017/000000000001.jpg": image_bytes(8, 8, fmt="JPEG")})
    write_zip(folder / "image_info_test2017.zip", {"annotations/image_info_test2017.json": b"{}"})
    return expected


__all__ = ["write_caltech_camera_traps", "write_coco_single_label"]
