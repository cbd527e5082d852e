"""A tiny Interact: real and illustration image zips with their annotation lists."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_zip
from workers.ingest.readers.interact import PARTS, TRUNCATED

NAMES = ("person walking", "person sitting", "dog jumping")


def write_interact(folder: Path) -> dict[str, tuple[str, None, str]]:
    expected = {}
    seed = 0
    for images, annotations, list_file, image_set in PARTS:  # noqa: F402
        members: dict[str, bytes] = {"imgs/": b""}
        lines = []
        per_class = 4 if image_set == "real" else 1
        for label, name in enumerate(NAMES):
            for i in range(per_class):
                seed += 1
                file = f"{image_set[:4].upper()}{seed:04d}_{i:02d}.jpg"
                members[f"imgs/{file}"] = image_bytes(30, 22 + seed % 5, seed=seed, fmt="JPEG")
                lines.append(f"{label + 1};{file};{name}")
                expected[file] = (name, None, image_set)
        if image_set == "real":  # a truncated image the reference leaves out
            file = TRUNCATED[0].split("/")[1]
            members[f"imgs/{file}"] = b"\xff\xd8truncated"
            lines.append(f"1;{file};{NAMES[0]}")
        write_zip(folder / images, members)
        write_zip(folder / annotations, {list_file: ("\n".join(lines) + "\n").encode()})
    return expected


__all__ = ["NAMES", "write_interact"]
