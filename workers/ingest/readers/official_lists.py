"""Image archives whose official split is given by list files or by which archive holds an image.

- ``dtd``: ``dtd-r1.0.1.tar.gz`` with ``dtd/images/<category>/<name>.jpg`` and the first of
  the ten official folds, ``dtd/labels/{train1,val1,test1}.txt`` (lines ``<category>/<name>.jpg``),
  as TFDS builds it; 47 categories (sorted). The tar is read twice: lists, then images.
- ``aloi``: ``aloi_red4_{col,view,ill}.tar`` with ``<root>/<object>/<object>_<condition>.png``;
  the class is the object number (1000 classes). As in the reference, the colour and viewpoint
  subsets are train and the illumination subset is test; the stereo tar is not used.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import iter_members, parent_name
from workers.ingest.readers.split_folders import labelled_rows

DTD_FOLD = 1


@reader("dtd")
def read_dtd(files: SourceFolder) -> ConvertedSource:
    archive = files.path("dtd-r1.0.1.tar.gz")
    wanted = {f"{part}{DTD_FOLD}.txt": part for part in ("train", "val", "test")}
    lists = {
        wanted[PurePosixPath(m.name).name]: m.data.decode().split()
        for m in iter_members(archive, lambda n: parent_name(n) == "labels" and PurePosixPath(n).name in wanted)
    }
    if len(lists) != 3:
        raise ValueError(f"{archive.name} lacks labels/{{train,val,test}}{DTD_FOLD}.txt.")
    split_of = {entry: part for part, entries in lists.items() for entry in entries}
    classes = sorted({entry.split("/")[0] for entry in split_of})
    index = {name: label for label, name in enumerate(classes)}

    def label(name: str) -> tuple[int, str] | None:
        path = PurePosixPath(name)
        split = split_of.get(f"{path.parent.name}/{path.name}") if "images" in path.parts else None
        return None if split is None else (index[path.parent.name], split)

    return ConvertedSource(rows=labelled_rows([archive], label), class_names=classes, official_split=True)


ALOI_OBJECTS = 1000


def _aloi(split: str):  # noqa: ANN202 - a Label for one subset
    def label(name: str) -> tuple[int, str] | None:
        parts = PurePosixPath(name).parts
        if len(parts) < 3 or not parts[1].isdigit() or not 1 <= int(parts[1]) <= ALOI_OBJECTS:
            return None
        return int(parts[1]) - 1, split

    return label


@reader("aloi")
def read_aloi(files: SourceFolder) -> ConvertedSource:
    def rows():  # noqa: ANN202 - train subsets first, then the test subset
        for subset, split in (("col", "train"), ("view", "train"), ("ill", "test")):
            yield from labelled_rows([files.path(f"aloi_red4_{subset}.tar")], _aloi(split))

    return ConvertedSource(rows=rows(), class_names=[str(i) for i in range(1, ALOI_OBJECTS + 1)], official_split=True)


__all__ = ["ALOI_OBJECTS", "DTD_FOLD", "read_aloi", "read_dtd"]
