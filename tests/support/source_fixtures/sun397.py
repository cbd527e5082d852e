"""A tiny SUN397: a few images named as in TFDS's lists, one unlisted, one TFDS skips."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar, write_zip
from workers.ingest.readers.sun397 import SKIPPED, tfds_splits


def write_sun397(folder: Path) -> dict[str, tuple[str, str]]:
    splits = tfds_splits()
    chosen: list[str] = []
    for want in ("train", "train", "val", "test", "test"):
        chosen.append(
            next(
                p
                for p, s in sorted(splits.items(), reverse=want == "test")
                if s == want and p not in chosen and "/outdoor" not in p
            )
        )
    members = {"SUN397/": b"", "SUN397/ClassName.txt": b"/a/abbey\n"}
    for i, image in enumerate(chosen):
        members[f"SUN397{image}"] = image_bytes(30 + i, 25, seed=i, fmt="JPEG")
    members["SUN397/a/abbey/sun_notinanylist.jpg"] = image_bytes(9, 9, fmt="JPEG")
    members[SKIPPED[0]] = b"not an image"
    write_tar(folder / "SUN397.tar.gz", members, compression="gz")
    write_zip(folder / "Partitions.zip", {"Partitions/Training_01.txt": chosen[0].encode()})
    return {p: (p.rsplit("/", 1)[0], splits[p]) for p in chosen}


__all__ = ["write_sun397"]
