"""SUN397, as TFDS's default ``sun397/tfds`` config that dm_nevis uses: TFDS's own random
train / validation / test lists (``sun397_tfds_{tr,va,te}.txt``, shipped here together as
``data/sun397_tfds_splits.txt.xz``, one ``<split> <path>`` line per image) over the images of
``SUN397.tar.gz``; the label is the image's category path (``/c/car_interior/backseat``), the
class names TFDS's ``sun397_labels.txt``. The two images TFDS skips as undecodable are skipped.
Images are kept as stored (TFDS re-encodes every one as JPEG). ``Partitions.zip`` (the ten
official partitions, other TFDS configs) is not needed.
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.class_name_lists import class_names
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name
from workers.ingest.writers.parquet_writer import ImageRow

SPLITS_FILE = "data/sun397_tfds_splits.txt.xz"
SKIPPED = ("SUN397/c/church/outdoor/sun_bhenjvsvrtumjuri.jpg", "SUN397/t/track/outdoor/sun_aophkoiosslinihb.jpg")
_PREFIX = "SUN397"


@lru_cache(maxsize=1)
def tfds_splits() -> dict[str, str]:
    """Image path (``/a/abbey/sun_....jpg``) -> ``train`` / ``val`` / ``test``."""
    blob = resources.files(__package__).joinpath(SPLITS_FILE).read_bytes()
    return dict(reversed(line.split(" ", 1)) for line in lzma.decompress(blob).decode().splitlines())


@reader("sun397")
def read_sun397(files: SourceFolder) -> ConvertedSource:
    archive = files.path("SUN397.tar.gz")
    splits = tfds_splits()
    classes = class_names("sun397")
    index = {c: i for i, c in enumerate(classes)}

    def path(name: str) -> str:
        return clean_name(name)[len(_PREFIX) :]

    def listed(name: str) -> bool:
        name = clean_name(name)
        return name.startswith(_PREFIX + "/") and name not in SKIPPED and path(name) in splits

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, listed):
            image = path(member.name)
            yield ImageRow(image=member.data, label=index[image.rsplit("/", 1)[0]], split=splits[image])

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"splits": "TFDS sun397/tfds lists (70/10/20)"},
        keeps="images of SUN397/ whose path is in TFDS's sun397/tfds train, "
        "validation or test list, less the 2 TFDS skips",
    )


__all__ = ["SKIPPED", "tfds_splits"]
