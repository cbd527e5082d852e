"""Class names in label order for sources whose files do not carry them (package data).

``data/class_names.json`` holds, per catalogue key, the list the reference uses: TFDS's
builders for Oxford Flowers 102 and Oxford-IIIT Pet, dm_nevis's handlers for Food-101 and
WikiArt styles.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

FILE = "data/class_names.json"


@lru_cache(maxsize=1)
def _all() -> dict[str, list[str]]:
    return json.loads(resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8"))


def class_names(key: str) -> tuple[str, ...]:
    return tuple(_all()[key])


__all__ = ["class_names"]
