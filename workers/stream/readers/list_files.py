"""Sources whose splits or labels come from list files beside the images.

- ``oxford_iiit_pet`` (TFDS): ``annotations/{trainval,test}.txt`` lines ``<name> <class>
  <species> <breed id>``; label ``class - 1``, the image ``images/<name>.jpg``.
"""

from __future__ import annotations

from collections.abc import Iterator

from workers.stream.formats.parquet_writer import ImageRow
from workers.stream.readers.base import ConvertedSource, SourceFolder, reader
from workers.stream.readers.class_name_lists import class_names
from workers.stream.readers.layouts import iter_members
from workers.stream.readers.member_scan import collect, need, stem, text_lines


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

    return ConvertedSource(rows=rows(), class_names=class_names("oxford_iiit_pet"),
                           official_split=True,
                           source_facts={"labels": "annotations/{trainval,test}.txt class - 1"})



__all__: list[str] = []
