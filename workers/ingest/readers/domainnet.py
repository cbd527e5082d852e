"""DomainNet (cleaned, as TFDS's ``domainnet/<domain>`` configs): one zip of images per domain
and ``<domain>_{train,test}.txt`` lists of ``<domain>/<class>/<file>.jpg <label>``.

Every domain's lists are read; the class names are the folder names of the listed paths, by
label. ``attr.domain`` and the source's train / test parts feed the stream's
``held_out_parts`` rule: the train / test parts of real, painting, clipart, quickdraw and
infograph become train / dev, sketch's train / test become dev-test / test (dm_nevis's
DomainNet builder).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members
from workers.ingest.readers.member_scan import clean_name, text_lines
from workers.ingest.writers.parquet_writer import ImageRow

DOMAINS = ("real", "painting", "clipart", "quickdraw", "infograph", "sketch")


@reader("domainnet")
def read_domainnet(files: SourceFolder) -> ConvertedSource:
    listed: dict[str, tuple[int, str]] = {}
    names: dict[int, str] = {}
    for domain in DOMAINS:
        for part in ("train", "test"):
            path = files.path(f"{domain}_{part}.txt")
            for line in text_lines(path.read_bytes()):
                rel, label = line.rsplit(maxsplit=1)
                cls = PurePosixPath(rel).parent.name
                if names.setdefault(int(label), cls) != cls:
                    raise DatasetFormatError(
                        f"{path.name}: label {label} is {cls!r} here and {names[int(label)]!r} elsewhere."
                    )
                listed[rel] = (int(label), part)
    if sorted(names) != list(range(len(names))):
        raise DatasetFormatError("DomainNet lists do not number their classes 0..N-1.")
    zips = [files.path(f"{domain}.zip") for domain in DOMAINS]

    def rows() -> Iterator[ImageRow]:
        for domain, archive in zip(DOMAINS, zips):
            for member in iter_members(archive, lambda n: clean_name(n) in listed):
                label, split = listed[clean_name(member.name)]
                yield ImageRow(image=member.data, label=label, split=split, attributes={"domain": domain})

    return ConvertedSource(
        rows=rows(),
        class_names=[names[i] for i in range(len(names))],
        official_split=True,
        source_facts={"labels": "<domain>_{train,test}.txt", "attributes": {"domain": "the zip an image comes from"}},
    )


__all__ = ["DOMAINS"]
