"""A tiny AnimalWeb RAR (stored members): images named <class>_<n>.jpg, one duplicate."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tid import stored_rar
from tests.support.source_fixtures.tiny_archives import image_bytes


def write_animal_web(folder: Path) -> dict[str, tuple[str, None]]:
    names = {"saluki_1.jpg": 1, "saluki_2.jpg": 2, "fox_10.jpg": 3, "panda_3.jpg": 4}
    members = {
        f"animal_dataset_v1_clean_check/{n}": image_bytes(20 + s, 15, seed=s, fmt="JPEG") for n, s in names.items()
    }
    members["animal_dataset_v1_clean_check/saluki_9.jpg"] = members[
        "animal_dataset_v1_clean_check/saluki_1.jpg"
    ]  # same pixels and class: kept once
    members["animal_dataset_v1_clean_check/saluki_1.pts"] = b"version: 1"
    (folder / "animal_dataset_v1_c.rar").write_bytes(stored_rar(members))
    return {n: (n.split("_")[0], None) for n in names}


__all__ = ["write_animal_web"]
