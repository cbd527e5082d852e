"""A tiny VisTex: ``VisTex.tar.gz`` of LZW ``.tar.Z`` archives (and a plain tar) that unpack
into one tree, reference textures being symbolic links to the images by resolution."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import ncompress

from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar

IMAGES = {"Bark.0000": "Bark", "Bark.0001": "Bark", "Brick.0000": "Brick", "Water.0003": "Water"}


def _tar(entries: list[tuple[str, bytes | str]]) -> bytes:
    """A tar of files (bytes) and symbolic links (str: the link's target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, value in entries:
            info = tarfile.TarInfo(name)
            if isinstance(value, str):
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
            else:
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
    return buffer.getvalue()


def write_vistex(folder: Path) -> dict[str, tuple[str, None]]:
    pixels = {n: image_bytes(16 + i, 12, seed=i, fmt="PPM") for i, n in enumerate(IMAGES)}
    by_size = _tar([(f"VisTex/Images.512x512/{n}.ppm", data) for n, data in pixels.items() if n != "Water.0003"])
    links = [
        (f"VisTex/Images/Reference/{cls}/{n}.ppm", f"../../../Images.512x512/{n}.ppm")
        for n, cls in IMAGES.items()
        if n != "Water.0003"
    ]
    links.append(("VisTex/Images/Scenes/Bark/Scene.0000.ppm", "../../../Images.512x512/Bark.0000.ppm"))
    reference = _tar(links)
    plain = _tar([("VisTex/Images/Reference/Water/Water.0003.ppm", pixels["Water.0003"])])
    write_tar(
        folder / "VisTex.tar.gz",
        {
            "VisionTexture/README": b"VisTex",
            "VisionTexture/VisTex.512x512.tar.Z": ncompress.compress(by_size),
            "VisionTexture/VisTex.reference.tar.Z": ncompress.compress(reference),
            "VisionTexture/VisTex.water.tar": plain,
        },
        compression="gz",
    )
    return {n: (cls, None) for n, cls in IMAGES.items()}


__all__ = ["IMAGES", "write_vistex"]
