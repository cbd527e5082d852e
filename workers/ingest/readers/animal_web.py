"""AnimalWeb (``animal_dataset_v1_c.rar``), as the dm_nevis handler reads it: every ``*.jpg``
(paths dropped, as ``unrar e``) is labelled by its file name's prefix before ``_`` through the
handler's 352 class names; duplicates (the same RGB pixels and label) are kept once, in
archive order, before any split. No official split.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator

import numpy as np
from PIL import Image

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.class_name_lists import class_names
from workers.ingest.readers.tid import flat_members
from workers.ingest.writers.parquet_writer import ImageRow


def _rgb_digest(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image.convert("RGB"))
    return hashlib.md5(pixels.tobytes()).digest()  # noqa: S324 - identity, not security


@reader("animal_web")
def read_animal_web(files: SourceFolder) -> ConvertedSource:
    path = files.path("animal_dataset_v1_c.rar")
    archive, members = flat_members(path)
    classes = class_names("animal_web")
    index = {c: i for i, c in enumerate(classes)}

    def rows() -> Iterator[ImageRow]:
        seen: set[tuple[bytes, int]] = set()
        with archive:
            for name, info in members.items():
                if not name.endswith("jpg"):
                    continue
                prefix = name.rsplit(".", 1)[0].split("_")[0]
                if prefix not in index:
                    raise DatasetFormatError(
                        f"{path.name}: {name}'s prefix {prefix!r} is not one of the reference's classes."
                    )
                data = archive.read(info)
                key = (_rgb_digest(data), index[prefix])
                if key not in seen:
                    seen.add(key)
                    yield ImageRow(image=data, label=index[prefix])

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        source_facts={"labels": "file-name prefix; duplicates (RGB pixels, label) dropped"},
    )


__all__: list[str] = []
