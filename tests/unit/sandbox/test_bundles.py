"""Checking and unpacking uploaded learner bundles."""

from __future__ import annotations

import importlib
import io
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from workers.sandbox.bundles import (
    bundle_kind,
    check_bundle,
    extract_bundle,
    safe_filename,
)
from services.core.errors import BundleError

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


@pytest.mark.parametrize(("layout", "module"), [
    ({"bundle_flat_mod.py": CODE}, "bundle_flat_mod"),  # a plain source archive
    ({"proj-1.0/bundle_sdist_mod.py": CODE, "proj-1.0/PKG-INFO": b""}, "bundle_sdist_mod"),  # an sdist
    ({"proj-1.0/src/bundle_src_pkg/__init__.py": CODE, "proj-1.0/pyproject.toml": b""}, "bundle_src_pkg"),
])
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
    root = extract_bundle(archive, tmp_path / "u", kind=check_bundle(archive, filename=archive.name, max_unpacked_bytes=10_000))
    assert (root / "wpkg" / "__init__.py").read_bytes() == CODE


@pytest.mark.parametrize(("members", "words"), [
    ({"../up.py": CODE}, "outside"), ({"/abs.py": CODE}, "outside"), ({"C:/x.py": CODE}, "outside"),
    ({"data.txt": b"x"}, "no .py"), ({"big.py": b"x" * 20_000}, "unpacks to"),
])
def test_unsafe_or_useless_bundles_are_refused(tmp_path, members, words):
    archive = _targz(tmp_path / "b.tgz", members)
    with pytest.raises(BundleError, match=words) as caught:
        check_bundle(archive, filename="b.tgz", max_unpacked_bytes=10_000)
    assert caught.value.field == "file"


def test_a_zip_with_a_symlink_is_refused(tmp_path):
    path = tmp_path / "l.zip"
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("pkg/link.py")
        info.external_attr = (0o120777 << 16)
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
