"""Fixture for Brodatz: one small GIF per texture, under every file name the catalogue lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from tests.support.source_fixtures.tiny import pixels, source_dir
from workers.stream.sources.catalogue import load_catalogue


def write_brodatz(data_dir: Path, height: int = 10, width: int = 13) -> dict[str, np.ndarray]:
    """Grey GIFs ``D<n>.gif`` of ``height`` x ``width``; returns their pixels by stem."""
    folder = source_dir(data_dir, "brodatz")
    out = {}
    for i, file in enumerate(load_catalogue().find("brodatz").files):
        grey = pixels(i, height, width, 1)
        Image.fromarray(grey).save(folder / file.name, format="GIF")
        with Image.open(folder / file.name) as back:
            out[Path(file.name).stem] = np.asarray(back.convert("L"))
    return out


__all__ = ["write_brodatz"]
