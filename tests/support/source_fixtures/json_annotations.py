"""A tiny Caltech Camera Traps (ECCV'18) source: an images tar and COCO-style JSON files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar

CATEGORIES = [{"id": 1, "name": "opossum"}, {"id": 30, "name": "empty"}, {"id": 6, "name": "bobcat"},
              {"id": 33, "name": "car"}]
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
        annotations = [{"id": f"a{i}", "image_id": k, "category_id": v}
                       for i, (k, v) in enumerate(labels.items())]
        doc = {"info": {}, "categories": CATEGORIES, "annotations": annotations,
               "images": [{"id": k, "file_name": f"{k}.jpg"} for k in labels]}
        jsons[f"eccv_18_annotation_files/{file}"] = json.dumps(doc).encode()
        for i, (image_id, category) in enumerate(labels.items()):
            members[f"eccv_18_all_images_sm/{image_id}.jpg"] = image_bytes(24, 16 + i, seed=10 * n + i,
                                                                           fmt="JPEG")
            expected[image_id] = (names[category], split)
    members["eccv_18_all_images_sm/unlabelled-z.jpg"] = image_bytes(8, 8, fmt="JPEG")
    jsons["eccv_18_annotation_files/cis_val_annotations.json"] = b"{}"
    write_tar(folder / "eccv_18_all_images_sm.tar.gz", members, compression="gz")
    write_tar(folder / "eccv_18_annotations.tar.gz", jsons, compression="gz")
    return expected


__all__ = ["write_caltech_camera_traps"]
