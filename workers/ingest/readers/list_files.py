"""Sources whose splits or labels come from list files beside the images.

- ``food101`` (dm_nevis): ``food-101/meta/{train,test}.txt`` of ``<class>/<id>``; the label is
  the image's folder, in the handler's own class order.
- ``tiny_imagenet`` (dm_nevis): ``train/<wnid>/images/<wnid>_N.JPEG`` labelled by the file
  name's prefix, ``val/images`` by ``val/val_annotations.txt``; classes are ``wnids.txt``
  sorted; val is the test split, the unlabelled test part is not read.
- ``german_tsr`` (dm_nevis): training images in ``<class 000NN>/`` folders, test images
  labelled by the last column of ``GT-final_test.csv``.
- ``oxford_iiit_pet`` (TFDS): ``annotations/{trainval,test}.txt`` lines ``<name> <class>
  <species> <breed id>``; label ``class - 1``, the image ``images/<name>.jpg``.
- ``wiki_paintings_style`` (dm_nevis): ``style_{train,val}.csv`` against ``wikiart.zip``.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import PurePosixPath

import pandas as pd

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.class_name_lists import class_names
from workers.ingest.readers.layouts import is_junk, iter_members
from workers.ingest.readers.member_scan import base_name, clean_name, collect, need, stem, text_lines
from workers.ingest.writers.parquet_writer import ImageRow


def _relative(name: str, depth: int) -> str:
    """The last ``depth`` path parts of a member, without the suffix of the last."""
    parts = PurePosixPath(clean_name(name)).parts[-depth:]
    return "/".join([*parts[:-1], PurePosixPath(parts[-1]).stem])


@reader("food101")
def read_food101(files: SourceFolder) -> ConvertedSource:
    archive = files.path("food-101.tar.gz")
    wanted = ["food-101/meta/train.txt", "food-101/meta/test.txt"]
    train, test = need(collect(archive, lambda n: n in wanted, want=2), wanted, archive)
    split_of = {**{k: "train" for k in text_lines(train)}, **{k: "test" for k in text_lines(test)}}
    classes = class_names("food101")

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: _relative(n, 2) in split_of and "/images/" in clean_name(n)):
            key = _relative(member.name, 2)
            yield ImageRow(image=member.data, label=classes.index(key.split("/")[0]), split=split_of[key])

    return ConvertedSource(
        rows=rows(),
        class_names=classes,
        official_split=True,
        source_facts={"labels": "image folder; meta/{train,test}.txt"},
    )


_TINY = "tiny-imagenet-200/"
_WORD = re.compile(r"\b(val|test|train)\b")


@reader("tiny_imagenet")
def read_tiny_imagenet(files: SourceFolder) -> ConvertedSource:
    archive = files.path("tiny-imagenet-200.zip")
    with zipfile.ZipFile(archive) as handle:
        wnids = sorted(text_lines(handle.read(_TINY + "wnids.txt")))
        val = {
            line.split("\t")[0]: line.split("\t")[1]
            for line in text_lines(handle.read(_TINY + "val/val_annotations.txt"))
        }
    index = {w: i for i, w in enumerate(wnids)}

    def part(name: str) -> str | None:
        words = set(_WORD.findall(clean_name(name)))
        if name.endswith(".txt") or is_junk(name) or "test" in words or len(words) != 1:
            return None
        return words.pop()

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(archive, lambda n: part(n) is not None):
            name = base_name(member.name)
            if part(member.name) == "train":
                yield ImageRow(image=member.data, label=index[name.split("_")[0]], split="train")
            else:
                if name not in val:
                    raise DatasetFormatError(f"{archive.name}: {member.name} is not in val_annotations.txt.")
                yield ImageRow(image=member.data, label=index[val[name]], split="test")

    return ConvertedSource(
        rows=rows(), class_names=wnids, official_split=True, source_facts={"test": "the val part (val_annotations.txt)"}
    )


@reader("german_tsr")
def read_german_tsr(files: SourceFolder) -> ConvertedSource:
    train, test = files.path("GTSRB_Final_Training_Images.zip"), files.path("GTSRB_Final_Test_Images.zip")
    found = collect(files.path("GTSRB_Final_Test_GT.zip"), lambda n: base_name(n) == "GT-final_test.csv")
    (table,) = need(found, ["GT-final_test.csv"], files.path("GTSRB_Final_Test_GT.zip"))
    test_labels = {}
    for line in text_lines(table):  # Filename;Width;...;ClassId, under a header
        fields = line.split(";")
        if fields[-1].strip().isdigit():
            test_labels[fields[0].strip()] = int(fields[-1])
    keep = lambda n: not n.lower().endswith((".csv", ".txt")) and not is_junk(n) and not n.endswith("/")  # noqa: E731

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(train, keep):
            folder = PurePosixPath(member.name).parent.name
            if not folder.isdigit():
                raise DatasetFormatError(f"{train.name}: {member.name} is not in a class folder.")
            yield ImageRow(image=member.data, label=int(folder), split="train")
        for member in iter_members(test, keep):
            if base_name(member.name) not in test_labels:
                raise DatasetFormatError(f"{test.name}: {member.name} is not in GT-final_test.csv.")
            yield ImageRow(image=member.data, label=test_labels[base_name(member.name)], split="test")

    return ConvertedSource(
        rows=rows(),
        class_names=[f"{c:05d}" for c in range(43)],
        official_split=True,
        source_facts={"labels": "train: class folder; test: GT-final_test.csv"},
    )


@reader("oxford_iiit_pet")
def read_oxford_iiit_pet(files: SourceFolder) -> ConvertedSource:
    images, annotations = files.path("images.tar.gz"), files.path("annotations.tar.gz")
    wanted = ["annotations/trainval.txt", "annotations/test.txt"]
    trainval, test = need(collect(annotations, lambda n: n in wanted, want=2), wanted, annotations)
    label_of: dict[str, tuple[int, str]] = {}
    for data, split in ((trainval, "train"), (test, "test")):
        for line in text_lines(data):
            name, label = line.split()[:2]
            label_of[name] = (int(label) - 1, split)

    def rows() -> Iterator[ImageRow]:
        for member in iter_members(images, lambda n: n.endswith(".jpg") and stem(n) in label_of):
            label, split = label_of[stem(member.name)]
            yield ImageRow(image=member.data, label=label, split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=class_names("oxford_iiit_pet"),
        official_split=True,
        source_facts={"labels": "annotations/{trainval,test}.txt class - 1"},
    )


@reader("wiki_paintings_style")
def read_wiki_paintings_style(files: SourceFolder) -> ConvertedSource:
    """WikiArt styles (dm_nevis): ``style_{train,val}.csv`` rows ``<Style>/<file>,<class id>``
    name ``wikiart/<Style>/<file>`` in ``wikiart.zip``; val is the test split. As the
    reference reads each CSV with pandas' default header, its first line is not an example;
    an image the zip cannot inflate is skipped, as there. Images keep their size (the
    reference shrinks them to 256 px at most)."""
    images, tables = files.path("wikiart.zip"), files.path("wikiart_csv.zip")
    wanted = ["style_train.csv", "style_val.csv"]
    train, val = need(collect(tables, lambda n: base_name(n) in wanted), wanted, tables)
    parts = [(pd.read_csv(io.BytesIO(data)), split) for data, split in ((train, "train"), (val, "test"))]

    def rows() -> Iterator[ImageRow]:
        with zipfile.ZipFile(images) as archive:
            for table, split in parts:
                for name, label in zip(table.iloc[:, 0], table.iloc[:, 1]):
                    try:
                        data = archive.read(f"wikiart/{name}")
                    except (zlib.error, zipfile.BadZipFile):
                        continue
                    yield ImageRow(image=data, label=int(label), split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=class_names("wiki_paintings_style"),
        official_split=True,
        source_facts={
            "labels": "style_{train,val}.csv class ids; each CSV's first line read as a header, as the reference"
        },
    )


__all__: list[str] = []
