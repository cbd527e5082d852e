"""Checking and unpacking uploaded learner bundles."""

from __future__ import annotations

import gzip
import importlib
import io
import re
import struct
import sys
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest

from services.core.errors import BundleError
from services.store.objects import LocalObjectStore
from workers.sandbox.bundles import bundle_kind, check_bundle, extract_bundle, safe_filename, unpack_stored_bundle
from workers.sandbox.bundles import limits as bundle_limits
from workers.sandbox.bundles import unpack as bundle_unpack

CODE = b"def make():\n    return 'made by the bundle'\n"


def _targz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize(
    ("layout", "module"),
    [
        ({"bundle_flat_mod.py": CODE}, "bundle_flat_mod"),  # a plain source archive
        ({"proj-1.0/bundle_sdist_mod.py": CODE, "proj-1.0/PKG-INFO": b""}, "bundle_sdist_mod"),  # an sdist
        ({"proj-1.0/src/bundle_src_pkg/__init__.py": CODE, "proj-1.0/pyproject.toml": b""}, "bundle_src_pkg"),
    ],
)
def test_a_source_bundle_unpacks_to_an_importable_root(tmp_path, layout, module):
    archive = _targz(tmp_path / "b.tar.gz", layout)
    kind = check_bundle(archive, filename="b.tar.gz", max_unpacked_bytes=10_000)
    root = extract_bundle(archive, tmp_path / "unpacked", kind=kind)
    sys.path.insert(0, str(root))
    try:
        assert importlib.import_module(module).make() == "made by the bundle"
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(module, None)
    assert extract_bundle(archive, tmp_path / "unpacked", kind=kind) == root  # idempotent


def test_a_wheel_unpacks_at_its_root(tmp_path):
    archive = _zip(tmp_path / "w-1.0-py3-none-any.whl", {"wpkg/__init__.py": CODE, "w-1.0.dist-info/METADATA": b""})
    root = extract_bundle(
        archive, tmp_path / "u", kind=check_bundle(archive, filename=archive.name, max_unpacked_bytes=10_000)
    )
    assert (root / "wpkg" / "__init__.py").read_bytes() == CODE


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"../up.py": CODE}, "outside"),
        ({"/abs.py": CODE}, "outside"),
        ({"C:/x.py": CODE}, "outside"),
        ({"data.txt": b"x"}, "no .py"),
        ({"big.py": b"x" * 20_000}, "unpacks to"),
    ],
)
def test_unsafe_or_useless_bundles_are_refused(tmp_path, members, words):
    archive = _targz(tmp_path / "b.tgz", members)
    with pytest.raises(BundleError, match=words) as caught:
        check_bundle(archive, filename="b.tgz", max_unpacked_bytes=10_000)
    assert caught.value.field == "file"


def test_a_zip_with_a_symlink_is_refused(tmp_path):
    path = tmp_path / "l.zip"
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("pkg/link.py")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="link"):
        check_bundle(path, filename="l.zip", max_unpacked_bytes=10_000)


@pytest.mark.parametrize(("name", "kind"), [("a.whl", "zip"), ("A.ZIP", "zip"), ("a.tar.gz", "tar"), ("a.tgz", "tar")])
def test_bundle_kinds(name, kind):
    assert bundle_kind(name) == kind


@pytest.mark.parametrize("name", ["a.tar", "a.exe", "a.gz", ""])
def test_other_file_types_are_refused(name):
    with pytest.raises(BundleError, match="wheel"):
        bundle_kind(name)


def test_safe_filenames():
    assert safe_filename("../../etc/pa ss.tar.gz") == "pa_ss.tar.gz"
    assert safe_filename("..") == "bundle"
    assert safe_filename("C:\\x\\y.whl") == "y.whl"


# --- one pass for check and unpack: what one reader sees, the other sees too ------------------


def _tar_bytes(members: dict[str, bytes], *, end: bool = True, fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """An uncompressed tar; without ``end`` it stops after the last member's data (no end
    marker), as the first half of a split archive would."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if not end:
            return buffer.getvalue()[: archive.offset]
    return buffer.getvalue()


def _refused(archive: Path, tmp_path: Path, words: str, *, kind: str = "tar", cap: int = 10_000) -> None:
    """Refused alike by the upload's check and by the worker's unpack, which leaves nothing."""
    with pytest.raises(BundleError, match=words) as caught:
        check_bundle(archive, filename=archive.name, max_unpacked_bytes=cap)
    assert caught.value.field == "file"
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    with pytest.raises(BundleError, match=words):
        extract_bundle(archive, out / "dest", kind=kind, max_unpacked_bytes=cap)
    assert list(out.iterdir()) == []  # no dest, no partial folder


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("first_has_end", [False, True])
def test_a_second_gzip_member_is_refused(tmp_path, first_has_end):
    """The reported attack: gzip(tiny tar) + gzip(big file and a hidden module). gzip would
    read both members, tarfile's stream mode only the first."""
    first = gzip.compress(_tar_bytes({"a.py": CODE}, end=first_has_end))
    second = gzip.compress(_tar_bytes({"hidden.py": CODE, "big.bin": bytes(2_000_000)}))
    archive = _write(tmp_path / "split.tar.gz", first + second)
    assert len(archive.read_bytes()) < 10_000
    _refused(archive, tmp_path, "after the end of its gzip stream")


@pytest.mark.parametrize("trailer", [b"junk", bytes(8), b"\x1f\x8b"])
def test_bytes_after_the_gzip_stream_are_refused(tmp_path, trailer):
    archive = _write(tmp_path / "t.tgz", gzip.compress(_tar_bytes({"a.py": CODE})) + trailer)
    _refused(archive, tmp_path, "after the end of its gzip stream")


@pytest.mark.parametrize(
    "tail",
    [
        bytes(1024) + b"hidden data after the end marker",  # after a proper end marker
        b"not a tar header".ljust(512, b"!"),  # right after the last member (tarfile stops silently)
        tarfile.TarInfo("hidden.py").tobuf(format=tarfile.USTAR_FORMAT)[:100],  # a cut-off header
    ],
    ids=["after-end-marker", "garbage-header", "cut-off-header"],
)
def test_bytes_after_the_tar_end_are_refused(tmp_path, tail):
    archive = _write(tmp_path / "t.tar.gz", gzip.compress(_tar_bytes({"a.py": CODE}, end=False) + tail))
    _refused(archive, tmp_path, "after the end of its tar archive")


def test_a_cut_short_gzip_stream_is_refused(tmp_path):
    whole = gzip.compress(_tar_bytes({"a.py": CODE, "b.py": bytes(5000)}))
    _refused(_write(tmp_path / "cut.tar.gz", whole[: len(whole) // 2]), tmp_path, "cut short")


def test_a_tar_ending_after_its_last_member_or_padded_long_is_accepted(tmp_path):
    """No end marker (some writers omit it) or a large blocking factor's zeros are fine."""
    for name, tail in (("bare.tar.gz", b""), ("padded.tar.gz", bytes(200 * 512))):
        archive = _write(tmp_path / name, gzip.compress(_tar_bytes({"a.py": CODE}, end=False) + tail))
        assert check_bundle(archive, filename=name, max_unpacked_bytes=10_000) == "tar"


def test_a_huge_pax_header_is_refused_without_reading_it(tmp_path):
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, 16 * 1024**3
    raw = pax.tobuf(format=tarfile.GNU_FORMAT) + bytes(4096)
    _refused(_write(tmp_path / "pax.tar.gz", gzip.compress(raw)), tmp_path, "inflates to more than")


def _honest_zip_bomb(path: Path, *, members: int = 50, size: int = 1_000_000) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.py", CODE)
        for index in range(members):
            archive.writestr(f"z{index}.bin", bytes(size))
    return path


def test_unpacked_bytes_are_counted_as_inflated_not_as_declared(tmp_path, monkeypatch):
    """With the declared-size shortcut switched off, the actual bytes still stop the pass at
    the cap, one chunk past it at most."""
    monkeypatch.setattr(bundle_limits.UnpackBudget, "expect", lambda self, declared: None)
    cap = 2_500_000
    zipped = _honest_zip_bomb(tmp_path / "bomb.zip")
    tarred = _write(
        tmp_path / "bomb.tar.gz",
        gzip.compress(_tar_bytes({"a.py": CODE, **{f"z{i}.bin": bytes(1_000_000) for i in range(50)}})),
    )
    for archive, kind in ((zipped, "zip"), (tarred, "tar")):
        with pytest.raises(BundleError, match="unpacks to more than") as caught:
            check_bundle(archive, filename=archive.name, max_unpacked_bytes=cap)
        at_least = int(re.search(r"at least (\d+)", str(caught.value)).group(1))
        assert cap < at_least <= cap + 1024 * 1024
        _refused(archive, tmp_path, "unpacks to more than", kind=kind, cap=cap)


def test_declared_sizes_refuse_a_bomb_before_inflating(tmp_path):
    _refused(_honest_zip_bomb(tmp_path / "bomb.zip"), tmp_path, "unpacks to more than", kind="zip", cap=2_500_000)


def _raw_zip(path: Path, entries: list[tuple[str, bytes, int]]) -> Path:
    """A zip written by hand, each entry deflated but with the size its headers declare."""
    local, central = bytearray(), bytearray()
    for name, data, declared in entries:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        packed = packer.compress(data) + packer.flush()
        crc, raw_name = zlib.crc32(data), name.encode()
        central += (
            struct.pack(
                "<4s4B4HL2L5H2L",
                b"PK\x01\x02",
                20,
                3,
                20,
                0,
                0,
                8,
                0,
                0,
                crc,
                len(packed),
                declared,
                len(raw_name),
                0,
                0,
                0,
                0,
                0o100644 << 16,
                len(local),
            )
            + raw_name
        )
        local += (
            struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(packed), declared, len(raw_name), 0)
            + raw_name
            + packed
        )
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(local), 0)
    return _write(path, bytes(local + central + end))


def test_a_zip_that_understates_a_size_is_refused(tmp_path):
    """Its headers say 100 bytes; the data inflates to 1 MB. Never more than declared comes
    out (zipfile stops there) and the checksum, of all of it, then fails."""
    path = _raw_zip(tmp_path / "liar.zip", [("a.py", CODE, len(CODE)), ("big.py", bytes(1_000_000), 100)])
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("big.py").file_size == 100
    assert (
        check_bundle(
            _raw_zip(tmp_path / "honest.zip", [("a.py", CODE, len(CODE))]),
            filename="honest.zip",
            max_unpacked_bytes=10_000,
        )
        == "zip"
    )
    _refused(path, tmp_path, "not a readable zip", kind="zip", cap=10_000)


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_the_member_count_cap_holds_at_check_and_unpack(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(bundle_limits, "MAX_MEMBERS", 5)
    members = {f"m{i}.py": CODE for i in range(6)}
    archive = _zip(tmp_path / "many.zip", members) if kind == "zip" else _targz(tmp_path / "many.tar.gz", members)
    _refused(archive, tmp_path, "more than 5 entries", kind=kind)
    fewer = dict(list(members.items())[:5])
    ok = _zip(tmp_path / "ok.zip", fewer) if kind == "zip" else _targz(tmp_path / "ok.tar.gz", fewer)
    assert check_bundle(ok, filename=ok.name, max_unpacked_bytes=10_000) == kind


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"a.py": CODE, "a.py/b.py": CODE}, "clashes"),  # a file where a folder is
        ({"pkg/b.py": CODE, "pkg": CODE}, "clashes"),
        ({"a.py": CODE, "./a.py": b"other"}, "clashes"),  # the same file twice
        ({"a.py": CODE, "x" * 300 + ".py": CODE}, "too long a path"),
        ({"a.py": CODE, "/".join(["d"] * 40) + "/m.py": CODE}, "too long a path"),
    ],
)
def test_what_could_not_be_unpacked_is_refused_by_the_check_too(tmp_path, members, words):
    _refused(_zip(tmp_path / "c.zip", members), tmp_path, words, kind="zip")
    _refused(_targz(tmp_path / "c.tar.gz", members), tmp_path, words)


def test_a_failed_unpack_leaves_no_partial_folder(tmp_path):
    archive = _targz(tmp_path / "b.tar.gz", {"a.py": CODE, "big.bin": bytes(20_000)})
    root = tmp_path / "bundles"
    root.mkdir()
    with pytest.raises(BundleError, match="unpacks to more than"):
        extract_bundle(archive, root / "sha", kind="tar", max_unpacked_bytes=10_000)
    assert list(root.iterdir()) == []


def test_an_unexpected_error_leaves_no_partial_folder_either(tmp_path, monkeypatch):
    archive = _targz(tmp_path / "b.tar.gz", {"a.py": CODE, "b.py": CODE})
    real_copy = bundle_unpack.copy_member
    calls = []

    def failing_copy(data, target, budget):
        calls.append(target)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        real_copy(data, target, budget)

    monkeypatch.setattr(bundle_unpack, "copy_member", failing_copy)
    root = tmp_path / "bundles"
    root.mkdir()
    with pytest.raises(RuntimeError, match="disk on fire"):
        extract_bundle(archive, root / "sha", kind="tar")
    assert calls[0].is_relative_to(root) and list(root.iterdir()) == []


def test_a_stored_bundle_is_checked_as_it_is_unpacked(tmp_path):
    first = gzip.compress(_tar_bytes({"a.py": CODE}, end=False))
    payload = first + gzip.compress(_tar_bytes({"hidden.py": CODE}))
    info = LocalObjectStore(tmp_path / "store").put_bytes("learners/bundles/x/split.tar.gz", payload)
    store = LocalObjectStore(tmp_path / "store")
    root = tmp_path / "bundles"
    with pytest.raises(BundleError, match="after the end of its gzip stream"):
        unpack_stored_bundle(store, key=info.key, sha256=info.sha256, root=root, max_unpacked_bytes=10_000)
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_common_tar_layouts_unpack(tmp_path, fmt):
    """Folders listed before their files, a ``./`` prefix, long names (pax or GNU records)."""
    deep = "proj-1.0/src/pkg/" + "sub_" * 30 + "/mod.py"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=fmt) as archive:
        for name in ("./", "./proj-1.0", "./proj-1.0/src", "./proj-1.0/src/pkg"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        files = {"./proj-1.0/src/pkg/__init__.py": CODE, "./proj-1.0/PKG-INFO": b"Name: proj\n"}
        if fmt != tarfile.USTAR_FORMAT:
            files[deep] = CODE
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    archive = _write(tmp_path / "proj-1.0.tar.gz", buffer.getvalue())
    kind = check_bundle(archive, filename=archive.name, max_unpacked_bytes=10_000)
    root = extract_bundle(archive, tmp_path / "u", kind=kind)
    assert root == tmp_path / "u" / "proj-1.0" / "src"
    assert (root / "pkg" / "__init__.py").read_bytes() == CODE
    assert [p.name for p in (tmp_path / "u").parent.iterdir() if ".partial" in p.name] == []
    if fmt != tarfile.USTAR_FORMAT:
        assert (tmp_path / "u" / deep).read_bytes() == CODE


def test_a_zip_with_folder_entries_unpacks(tmp_path):
    path = tmp_path / "p.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/", b"")
        archive.writestr("pkg/__init__.py", CODE)
        archive.writestr("pkg/data/table.csv", "a,b\n")
    root = extract_bundle(path, tmp_path / "u", kind=check_bundle(path, filename="p.zip", max_unpacked_bytes=10_000))
    assert root == tmp_path / "u"
    assert (root / "pkg" / "__init__.py").read_bytes() == CODE
    assert (root / "pkg" / "data" / "table.csv").read_text() == "a,b\n"
