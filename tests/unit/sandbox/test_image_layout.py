"""A saved image is unpacked only if it is the image its id names: the config blob must hash to
the id, every layer's uncompressed bytes to the config's diff_id. Layouts are written here by
hand (what a tampered store could hand over); no podman needed."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from workers.sandbox.images.layers import apply_layer
from workers.sandbox.images.limits import ImageBudget, ImageError, ImageLimits
from workers.sandbox.images.oci import open_layer, read_layout

GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _blob(folder: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (folder / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (folder / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def _layout(folder: Path, layers: list[bytes], *, media: str = GZIP, diff_ids: list[str] | None = None) -> str:
    """Write an OCI layout of ``layers`` (plain tars); returns the image id."""
    stored = [gzip.compress(layer) if media == GZIP else layer for layer in layers]
    diff_ids = diff_ids or [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers]
    config = json.dumps(
        {"rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {"Entrypoint": ["/bin/sh"], "User": "0"}}
    ).encode()
    image_id = _blob(folder, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"digest": image_id},
            "layers": [{"digest": _blob(folder, b), "mediaType": media} for b in stored],
        }
    ).encode()
    (folder / "index.json").write_text(json.dumps({"manifests": [{"digest": _blob(folder, manifest)}]}))
    return image_id


def _unpack(folder: Path, image_id: str, root: Path, limits: ImageLimits = ImageLimits()) -> None:
    layout = read_layout(folder, image_id=image_id, limits=limits)
    budget = ImageBudget(limits)
    for layer in layout.layers:
        with open_layer(layout, layer, budget) as stream:
            apply_layer(stream, root, budget)


def test_a_layout_that_is_its_image_unpacks(tmp_path):
    image_id = _layout(tmp_path / "oci", [_tar({"opt/learner/a.py": b"a"}), _tar({"opt/learner/b.py": b"b"})])
    (tmp_path / "root").mkdir()
    _unpack(tmp_path / "oci", image_id, tmp_path / "root")
    assert sorted(p.name for p in (tmp_path / "root" / "opt" / "learner").iterdir()) == ["a.py", "b.py"]


def test_a_layer_swapped_after_the_config_was_pinned_is_refused(tmp_path):
    honest = _tar({"opt/learner/a.py": b"honest"})
    image_id = _layout(
        tmp_path / "oci",
        [_tar({"opt/learner/a.py": b"evil"})],
        diff_ids=[f"sha256:{hashlib.sha256(honest).hexdigest()}"],
    )
    (tmp_path / "root").mkdir()
    with pytest.raises(ImageError, match="not the layer its config names"):
        _unpack(tmp_path / "oci", image_id, tmp_path / "root")


def test_a_layout_of_another_image_is_refused(tmp_path):
    _layout(tmp_path / "oci", [_tar({"a.py": b"a"})])
    with pytest.raises(ImageError, match="not the image"):
        read_layout(tmp_path / "oci", image_id="sha256:" + "0" * 64, limits=ImageLimits())


@pytest.mark.parametrize(
    ("media", "limits", "words"),
    [
        ("application/vnd.oci.image.layer.v1.tar+zstd", ImageLimits(), "only tar and gzip"),
        (GZIP, ImageLimits(max_layers=1), "2 layers.*NEVIS_IMAGE_MAX_LAYERS"),
    ],
)
def test_unsupported_or_too_many_layers_are_refused_before_any_is_read(tmp_path, media, limits, words):
    layers = [_tar({"a.py": b"a"}), _tar({"b.py": b"b"})]
    image_id = _layout(tmp_path / "oci", layers, media=media)
    with pytest.raises(ImageError, match=words):
        read_layout(tmp_path / "oci", image_id=image_id, limits=limits)


def test_a_layer_over_the_byte_cap_is_refused_at_its_header(tmp_path):
    bomb = _tar({"zeros.bin": bytes(5_000_000)})
    image_id = _layout(tmp_path / "oci", [bomb])
    (tmp_path / "root").mkdir()
    limits = ImageLimits(max_bytes=100_000, max_files=10)
    with pytest.raises(ImageError, match="NEVIS_IMAGE_MAX_BYTES"):
        _unpack(tmp_path / "oci", image_id, tmp_path / "root", limits)
    assert not (tmp_path / "root" / "zeros.bin").exists()  # refused at its header, nothing written
