"""An image's layers applied onto a root: whiteouts honoured, nothing hostile kept.

Layers are made here with :mod:`tarfile` (what a hostile image could hold, byte for byte);
no podman needed.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from workers.sandbox.images.layers import apply_layer
from workers.sandbox.images.limits import ImageBudget, ImageError, ImageLimits
from workers.sandbox.images.links import leaves_root, remove_escaping_links


def _layer(*entries: tarfile.TarInfo | tuple[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in entries:
            if isinstance(entry, tuple):
                info = tarfile.TarInfo(entry[0])
                info.size, info.mode = len(entry[1]), 0o644
                tar.addfile(info, io.BytesIO(entry[1]))
            else:
                tar.addfile(entry)
    buffer.seek(0)
    return buffer


def _info(name: str, kind: bytes, **fields) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _apply(root: Path, *layers: io.BytesIO, limits: ImageLimits = ImageLimits()) -> ImageBudget:
    budget = ImageBudget(limits)
    for layer in layers:
        apply_layer(layer, root, budget)
    return budget


def test_whiteouts_and_opaque_folders_hide_what_lower_layers_put_there(tmp_path):
    lower = _layer(("a/keep.py", b"k"), ("a/gone.py", b"g"), ("b/old.py", b"o"), ("b/sub/deep.py", b"d"))
    upper = _layer(("b/new.py", b"n"), ("a/.wh.gone.py", b""), ("b/.wh..wh..opq", b""))
    _apply(tmp_path, lower, upper)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [
        "a/keep.py",
        "b/new.py",
    ]  # this layer's own b/new.py stays, whatever the entry order


def test_devices_fifos_and_setuid_bits_are_neutralised_and_hard_links_copied(tmp_path):
    layer = _layer(
        _info("bin/su", tarfile.REGTYPE, mode=0o4755, size=0),
        _info("bin/sg", tarfile.REGTYPE, mode=0o2755, size=0),
        _info("dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1),
        _info("dev/sda", tarfile.BLKTYPE, devmajor=8, devminor=0),
        _info("run/fifo", tarfile.FIFOTYPE),
        ("data/x.txt", b"payload"),
        _info("data/hard", tarfile.LNKTYPE, linkname="data/x.txt"),
        _info("data/hard-missing", tarfile.LNKTYPE, linkname="nowhere"),
    )
    _apply(tmp_path, layer)
    for name in ("bin/su", "bin/sg"):
        mode = os.lstat(tmp_path / name).st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX) and stat.S_IMODE(mode) == 0o555
    assert not (tmp_path / "dev" / "mem").exists() and not (tmp_path / "dev" / "sda").exists()
    assert not (tmp_path / "run" / "fifo").exists()
    hard = tmp_path / "data" / "hard"
    assert hard.read_bytes() == b"payload" and os.lstat(hard).st_nlink == 1  # a copy, not a link
    assert not (tmp_path / "data" / "hard-missing").exists()
    assert stat.S_IMODE(os.lstat(tmp_path / "data" / "x.txt").st_mode) == 0o444  # read-only


def test_links_that_leave_the_root_are_removed_and_absolute_ones_kept_inside(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_text("outside")
    _apply(
        root,
        _layer(
            ("usr/lib/libx.so", b"x"),
            _info("lib", tarfile.SYMTYPE, linkname="usr/lib"),  # merged /usr: kept
            _info("to-root", tarfile.SYMTYPE, linkname="/"),  # made relative: the image's own root
            _info("etc/abs", tarfile.SYMTYPE, linkname="/usr/lib/libx.so"),
            _info("up", tarfile.SYMTYPE, linkname="../secret"),
            _info("a/b/deep-up", tarfile.SYMTYPE, linkname="../../../secret"),
            _info("sub/here", tarfile.SYMTYPE, linkname="."),  # sub/here is sub itself
            _info("sub/trick", tarfile.SYMTYPE, linkname="here/../../.."),  # lexically inside, really out
            _info("loop1", tarfile.SYMTYPE, linkname="loop2"),
            _info("loop2", tarfile.SYMTYPE, linkname="loop1"),
        ),
    )
    assert leaves_root(root, ("sub", "trick")) and not leaves_root(root, ("sub", "here"))
    removed = remove_escaping_links(root)
    left = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_symlink()}
    # a loop's first link goes; the other is left dangling (it leads nowhere)
    assert left == {"lib", "to-root", "etc/abs", "sub/here", "loop2"} and removed == 4
    assert not (root / "loop2").exists()
    assert os.readlink(root / "to-root") == "." and (root / "etc" / "abs").read_bytes() == b"x"
    assert os.path.realpath(root / "to-root") == str(root.resolve())


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ((("../escape.py", b"x"),), "climbs out of the root"),
        ((_info("lib", tarfile.SYMTYPE, linkname="/etc"), ("lib/evil.conf", b"x")), "write through links"),
    ],
)
def test_entries_that_would_write_outside_the_root_are_refused(tmp_path, entries, words):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(ImageError, match=words):
        _apply(root, _layer(*entries))
    assert not (tmp_path / "escape.py").exists()


@pytest.mark.parametrize(
    ("limits", "setting"),
    [(ImageLimits(max_files=3), "NEVIS_IMAGE_MAX_FILES"), (ImageLimits(max_bytes=1000), "NEVIS_IMAGE_MAX_BYTES")],
)
def test_each_cap_is_named_when_a_layer_breaks_it(tmp_path, limits, setting):
    layer = _layer(*[(f"f{i}.bin", bytes(400)) for i in range(5)])
    with pytest.raises(ImageError, match=setting) as caught:
        _apply(tmp_path, layer, limits=limits)
    assert caught.value.field == "image"


def test_the_layer_cap_is_named():
    with pytest.raises(ImageError, match="65 layers.*NEVIS_IMAGE_MAX_LAYERS"):
        ImageLimits().check_layers(65)
