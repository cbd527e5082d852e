"""A tiny VOC 2012 trainval tar with action lists and person annotations, and a test tar."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar

# image id -> [(box, actions on)]
PEOPLE = {
    "2010_000001": [((2, 3, 20, 15), ["jumping"]), ((0, 0, 10, 30), ["phoning", "walking"])],
    "2010_000002": [((5.5, 1, 25, 19), ["other"])],
    "2010_000003": [((1, 1, 9, 9), ["reading"])],
}


def _xml(people) -> bytes:
    objects = ""
    for (x0, y0, x1, y1), on in people:
        flags = "".join(
            f"<{a}>{1 if a in on else 0}</{a}>" for a in ("jumping", "phoning", "reading", "walking", "other")
        )
        objects += (
            f"<object><name>person</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin>"
            f"<xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox><actions>{flags}</actions>"
            "</object>"
        )
    return f"<annotation><filename>x.jpg</filename>{objects}</annotation>".encode()


def write_voc_actions(folder: Path) -> dict[str, tuple[list[str], None]]:
    base = "VOCdevkit/VOC2012/"
    members = {
        f"{base}JPEGImages/{i}.jpg": image_bytes(32, 36, seed=n, fmt="JPEG")
        for n, i in enumerate([*PEOPLE, "2010_000009"])
    }
    members.update({f"{base}Annotations/{i}.xml": _xml(p) for i, p in PEOPLE.items()})
    members[f"{base}Annotations/2010_000009.xml"] = _xml([((0, 0, 5, 5), ["jumping"])])
    members[f"{base}ImageSets/Action/jumping_trainval.txt"] = b"2010_000001  1  1\n2010_000002  1 -1\n"
    members[f"{base}ImageSets/Action/reading_trainval.txt"] = b"2010_000003  1  1\n"
    write_tar(folder / "VOCtrainval_11-May-2012.tar", members)
    write_tar(folder / "VOC2012test.tar", {f"{base}JPEGImages/2011_000001.jpg": image_bytes(8, 8)})
    expected = {}
    for image_id, people in PEOPLE.items():
        for n, ((x0, y0, x1, y1), on) in enumerate(people):
            extent = (int(y1) - int(y0), int(x1) - int(x0))
            expected[f"{image_id}/{n}"] = (sorted(on), None, extent)
    return expected


__all__ = ["PEOPLE", "write_voc_actions"]
