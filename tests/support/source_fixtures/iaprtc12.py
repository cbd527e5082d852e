"""A tiny IAPR TC-12 Kaggle zip: images, SAIAPR labels, word list and split .mat files."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from scipy.io import savemat

from tests.support.source_fixtures.tiny_archives import image_bytes, write_zip

WORDS = ("", "airplane", "animal", "sky")  # id 1 has an empty name in the real list
REGIONS = {  # image id -> [(region, label id)]: the last row's label is kept
    25: [(1, 4), (2, 2)],
    26: [(1, 3)],
    1013: [(1, 2), (2, 4), (3, 3)],
    1014: [(1, 4)],
    1015: [(1, 2)],
}
SPLITS = {"training": [25, 1013], "validation": [26], "testing": [1014, 1015]}


def _mat(name: str, ids: list[int]) -> bytes:
    buffer = io.BytesIO()
    savemat(buffer, {name: np.array(ids, dtype=float)[:, None]})
    return buffer.getvalue()


def write_iaprtc12(folder: Path) -> dict[str, tuple[list[str], str]]:
    members: dict[str, bytes] = {}
    members["saiaprtc12ok/benchmark/wlist.txt"] = "".join(f"{i + 1}\t{w}\n" for i, w in enumerate(WORDS)).encode()
    for image_id, regions in REGIONS.items():
        folder_id = image_id // 1000
        lines = "".join(f"{image_id} {r} {lab}\n" for r, lab in regions)
        path = f"saiaprtc12ok/benchmark/saiapr_tc-12/{folder_id:02d}/labels.txt"
        members[path] = members.get(path, b"") + lines.encode()
        picture = image_bytes(30, 20 + image_id % 7, seed=image_id, fmt="JPEG")
        members[f"iaprtc12/images/{folder_id:02d}/{image_id}.jpg"] = picture
        members[f"saiaprtc12ok/benchmark/saiapr_tc-12/{folder_id:02d}/images/{image_id}.jpg"] = picture
        members[f"iaprtc12/annotations_complete_eng/{folder_id:02d}/{image_id}.eng"] = b"<DOC/>"
    for name, ids in SPLITS.items():
        members[f"saiaprtc12ok/matlab/matlab/{name}.mat"] = _mat(name, ids)
    write_zip(folder / "iapr-tc12.zip", members)
    split = {"training": "train", "validation": "val", "testing": "test"}
    return {str(i): ([WORDS[REGIONS[i][-1][1] - 1]], split[part]) for part, ids in SPLITS.items() for i in ids}


__all__ = ["write_iaprtc12"]
