"""The remote client's local parts: the bundle a learner folder packs into, and the credentials file."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest

from services.cli.client.bundle import pack_learner
from services.cli.client.credentials import Credentials, load_credentials, save_credentials
from services.cli.remote_cmd import default_name
from services.core.errors import BundleError, ConfigError


def _folder(root: Path) -> Path:
    folder = root / "my learner"
    (folder / "pkg").mkdir(parents=True)
    (folder / "my_learner.py").write_text("def make():\n    return None\n")
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "README.md").write_text("hi\n")
    for junk in (
        ".git/HEAD",
        "__pycache__/my_learner.cpython-311.pyc",
        ".venv/bin/python",
        "pkg/__pycache__/x.pyc",
        "stray.pyc",
        "old.tar.gz",
    ):
        (folder / junk).parent.mkdir(parents=True, exist_ok=True)
        (folder / junk).write_text("junk")
    return folder


def test_pack_skips_caches_and_vcs_and_is_reproducible(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = pack_learner(folder, entrypoint="my_learner:make", dest=tmp_path / "a")
    os.utime(folder / "my_learner.py", (1, 1))  # times do not change the bundle
    second = pack_learner(folder, entrypoint="my_learner:make", dest=tmp_path / "b")
    assert first.files == ("README.md", "my_learner.py", "pkg/__init__.py")
    with tarfile.open(first.path) as archive:
        assert archive.getnames() == list(first.files)
    assert first.sha256 == second.sha256
    (folder / "my_learner.py").write_text("def make():\n    return 1\n")
    assert pack_learner(folder, entrypoint="my_learner:make", dest=tmp_path / "b").sha256 != first.sha256
    assert default_name(folder, first.sha256) == f"my-learner-{first.sha256[:10]}"


def test_pack_refuses_what_the_server_would(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with pytest.raises(BundleError, match="no other_module.py"):
        pack_learner(folder, entrypoint="other_module:make", dest=tmp_path)
    with pytest.raises(BundleError, match="over the 100-byte limit"):
        pack_learner(folder, entrypoint="my_learner:make", dest=tmp_path, max_bytes=100)
    (folder / "link.py").symlink_to(folder / "my_learner.py")
    with pytest.raises(BundleError, match="symbolic link"):
        pack_learner(folder, entrypoint="my_learner:make", dest=tmp_path)


def test_credentials_are_private_and_the_environment_overrides(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("NEVIS_URL", raising=False)
    monkeypatch.delenv("NEVIS_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="nevis login"):
        load_credentials()
    path = save_credentials(Credentials(url="http://127.0.0.1:8000", token="s3cret"))
    assert path == tmp_path / "config" / "nevis" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_credentials() == Credentials(url="http://127.0.0.1:8000", token="s3cret")
    monkeypatch.setenv("NEVIS_URL", "https://other.example/")
    monkeypatch.setenv("NEVIS_TOKEN", "t2")
    assert load_credentials() == Credentials(url="https://other.example", token="t2")


def test_submit_refuses_bad_fields_before_anything_runs(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app

    monkeypatch.setenv("NEVIS_URL", "http://127.0.0.1:9")  # nothing listens: nothing may be sent
    folder = _folder(tmp_path)
    for extra, field in (
        (["--entrypoint", "os:system"], "entrypoint"),
        (["--entrypoint", "my_learner:make", "--name", "bad name!"], "name"),
        (["--entrypoint", "my_learner:make", "--cpus", "-1"], "resources.cpus"),
    ):
        result = CliRunner().invoke(app, ["submit", str(folder), "--stream", "mini", *extra])
        assert result.exit_code != 0 and getattr(result.exception, "field", None) == field, result.output
