"""``nevis data fetch`` against a loopback HTTP server: checksums, resume, mirror, Kaggle, manual.

Every source here is a small fixture served by tests/support/range_server.py; nothing
reaches the internet. Each outcome the closing table can show has a test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.range_server import RangeServer
from workers.ingest.sources.fetch import fetch_sources
from workers.ingest.sources.verify import STATE_NAME
from workers.stream.sources.catalogue import Source, SourceFile, load_catalogue

ALPHA = bytes(range(256)) * 64  # 16 KiB
BETA = b"beta file " * 500


def md5(data: bytes) -> str:
    return "md5:" + hashlib.md5(data).hexdigest()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def no_kaggle(monkeypatch, tmp_path):
    """No Kaggle credentials unless a test sets them (never a developer's own)."""
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-kaggle"))


def source(server: RangeServer, key: str, files: dict[str, tuple[bytes, str | None]], **extra) -> Source:
    return Source(
        key=key,
        files=tuple(
            SourceFile(name=name, url=server.url(f"/origin/{key}/{name}"), checksum=checksum)
            for name, (_, checksum) in files.items()
        ),
        **extra,
    )


def served(key: str, files: dict[str, tuple[bytes, str | None]], prefix: str = "/origin") -> dict[str, bytes]:
    return {f"{prefix}/{key}/{name}": data for name, (data, _) in files.items()}


def test_fetches_and_verifies_then_finds_the_files_present(tmp_path):
    files = {"alpha.bin": (ALPHA, md5(ALPHA)), "beta.txt": (BETA, sha256(BETA))}
    with RangeServer(served("demo", files)).running() as server:
        demo = source(server, "demo", files)
        first = fetch_sources([demo], tmp_path, jobs=2)
        assert [(r.key, r.outcome) for r in first] == [("demo", "fetched")]
        assert (tmp_path / "demo" / "alpha.bin").read_bytes() == ALPHA
        assert (tmp_path / "demo" / "beta.txt").read_bytes() == BETA
        assert not list(tmp_path.rglob("*.part"))
        asked = len(server.requests)
        second = fetch_sources([demo], tmp_path)
    assert [r.outcome for r in second] == ["already present"] and second[0].ok
    assert len(server.requests) == asked  # nothing downloaded again
    state = json.loads((tmp_path / STATE_NAME).read_text())
    assert state["demo/alpha.bin"]["sha256"] == hashlib.sha256(ALPHA).hexdigest()


def test_a_checksum_mismatch_fails_and_keeps_nothing(tmp_path):
    files = {"alpha.bin": (ALPHA, md5(b"other bytes"))}
    with RangeServer(served("bad", files)).running() as server:
        [result] = fetch_sources([source(server, "bad", files)], tmp_path)
    assert result.outcome == "failed" and not result.ok
    assert "checksum mismatch" in result.detail and md5(b"other bytes") in result.detail
    assert not (tmp_path / "bad" / "alpha.bin").exists()
    assert not (tmp_path / "bad" / "alpha.bin.part").exists()


def test_an_interrupted_download_resumes_with_a_range(tmp_path):
    files = {"alpha.bin": (ALPHA, sha256(ALPHA))}
    path = "/origin/cut/alpha.bin"
    with RangeServer(served("cut", files), cut_first=frozenset({path})).running() as server:
        [result] = fetch_sources([source(server, "cut", files)], tmp_path)
        ranges = server.gets(path)
    assert result.outcome == "fetched", result.detail
    assert ranges[0] is None and ranges[1] == f"bytes={len(ALPHA) // 2}-"
    assert (tmp_path / "cut" / "alpha.bin").read_bytes() == ALPHA


def test_a_part_file_left_by_an_earlier_run_is_resumed(tmp_path):
    files = {"alpha.bin": (ALPHA, sha256(ALPHA))}
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "alpha.bin.part").write_bytes(ALPHA[:1000])
    with RangeServer(served("old", files)).running() as server:
        [result] = fetch_sources([source(server, "old", files)], tmp_path)
        assert server.gets("/origin/old/alpha.bin") == ["bytes=1000-"]
    assert result.outcome == "fetched" and (tmp_path / "old" / "alpha.bin").read_bytes() == ALPHA


def test_the_mirror_is_tried_first(tmp_path):
    files = {"alpha.bin": (ALPHA, md5(ALPHA))}
    with RangeServer({**served("m", files), **served("m", files, "/mirror")}).running() as server:
        [result] = fetch_sources([source(server, "m", files)], tmp_path, mirror=server.url("/mirror/"))
        assert server.gets("/mirror/m/alpha.bin") == [None]
        assert server.gets("/origin/m/alpha.bin") == []
    assert result.outcome == "fetched"


def test_a_file_missing_from_the_mirror_comes_from_its_origin(tmp_path):
    files = {"alpha.bin": (ALPHA, md5(ALPHA))}
    with RangeServer(served("o", files)).running() as server:
        [result] = fetch_sources([source(server, "o", files)], tmp_path, mirror=server.url("/mirror"))
        assert [p for p, _ in server.requests] == ["/mirror/o/alpha.bin", "/origin/o/alpha.bin"]
    assert result.outcome == "fetched"


def test_a_file_without_a_checksum_is_held_to_the_sha256_of_its_first_fetch(tmp_path):
    files = {"free.bin": (BETA, None)}
    with RangeServer(served("free", files)).running() as server:
        free = source(server, "free", files)
        assert fetch_sources([free], tmp_path)[0].outcome == "fetched"
        recorded = json.loads((tmp_path / STATE_NAME).read_text())["free/free.bin"]["sha256"]
        assert recorded == hashlib.sha256(BETA).hexdigest()
        (tmp_path / "free" / "free.bin").unlink()
        server.files["/origin/free/free.bin"] = b"changed upstream"
        [again] = fetch_sources([free], tmp_path)
    assert again.outcome == "failed" and f"sha256:{recorded}" in again.detail


def test_missing_kaggle_credentials_are_reported(tmp_path):
    kaggle = Source(
        key="faces",
        needs="kaggle",
        kaggle="someone/faces",
        files=(SourceFile(name="faces.zip", url="kaggle:someone/faces", checksum=md5(ALPHA)),),
    )
    [result] = fetch_sources([kaggle], tmp_path)
    assert result.outcome == "needs Kaggle credentials" and not result.ok
    assert "someone/faces" in result.detail and "KAGGLE_USERNAME" in result.detail


def test_kaggle_credentials_hand_the_download_to_the_client(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLE_USERNAME", "user")
    monkeypatch.setenv("KAGGLE_KEY", "key")
    calls = []

    def client(ref: str, folder: Path) -> Path:  # stands in for `kaggle datasets download`
        calls.append(ref)
        (folder / "faces.zip").write_bytes(ALPHA)
        return folder / "faces.zip"

    kaggle = Source(
        key="faces",
        needs="kaggle",
        kaggle="someone/faces",
        files=(SourceFile(name="faces.zip", url="kaggle:someone/faces", checksum=md5(ALPHA)),),
    )
    [result] = fetch_sources([kaggle], tmp_path, kaggle=client)
    assert calls == ["someone/faces"] and result.outcome == "fetched"


def test_a_manual_source_names_the_exact_file_and_place(tmp_path):
    imagenet = load_catalogue().find("imagenet2012")
    [result] = fetch_sources([imagenet], tmp_path)
    assert result.outcome == "needs a manual download"
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"):
        assert f"place {name} (sha256:" in result.detail
        assert str(tmp_path / "imagenet2012" / name) in result.detail


def test_a_manually_placed_file_is_verified_and_present(tmp_path):
    manual = Source(
        key="placed",
        needs="manual",
        files=(SourceFile(name="a.tar", url="http://127.0.0.1:9/a.tar", checksum=md5(BETA)),),
    )
    (tmp_path / "placed").mkdir()
    (tmp_path / "placed" / "a.tar").write_bytes(BETA)
    assert fetch_sources([manual], tmp_path)[0].outcome == "already present"


def test_a_wrong_copy_in_place_is_moved_aside_and_fetched_again(tmp_path):
    files = {"alpha.bin": (ALPHA, md5(ALPHA))}
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "alpha.bin").write_bytes(b"truncated")
    with RangeServer(served("w", files)).running() as server:
        [result] = fetch_sources([source(server, "w", files)], tmp_path)
    assert result.outcome == "fetched"
    assert (tmp_path / "w" / "alpha.bin.bad").read_bytes() == b"truncated"


def test_an_unreachable_origin_fails_with_the_reason(tmp_path):
    dead = Source(key="dead", files=(SourceFile(name="x.bin", url="http://127.0.0.1:9/x.bin", checksum=md5(BETA)),))
    [result] = fetch_sources([dead], tmp_path, attempts=1, timeout=5)
    assert result.outcome == "failed" and "cannot reach http://127.0.0.1:9/x.bin" in result.detail


def test_the_cli_progress_bars_follow_each_file(tmp_path):
    from io import StringIO

    from rich.console import Console
    from rich.progress import DownloadColumn, Progress, TextColumn

    from services.cli.data_fetch_cmd import ByteBars

    seen: list[tuple[str, float | None, float]] = []

    class Recording(ByteBars):
        def end(self, handle):
            task = self.progress.tasks[[t.id for t in self.progress.tasks].index(handle)]
            seen.append((task.description, task.total, task.completed))
            super().end(handle)

    files = {"alpha.bin": (ALPHA, md5(ALPHA))}
    out = StringIO()
    progress = Progress(
        TextColumn("{task.description}"), DownloadColumn(), console=Console(file=out, force_terminal=True, width=120)
    )
    with RangeServer(served("bars", files)).running() as server, progress:
        [result] = fetch_sources([source(server, "bars", files)], tmp_path, progress=Recording(progress))
    assert result.outcome == "fetched"
    assert seen == [("bars/alpha.bin", len(ALPHA), len(ALPHA))]
    assert "bars/alpha.bin" in out.getvalue()


def test_the_cli_reads_nevis_data_mirror(settings_env, monkeypatch):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.core.config import get_settings
    from services.core.errors import DataIntegrityError

    wrong = {"/m/imagenet2012/ILSVRC2012_img_val.tar": b"not imagenet"}
    with RangeServer(wrong).running() as server:
        monkeypatch.setenv("NEVIS_DATA_MIRROR", server.url("/m"))
        get_settings.cache_clear()
        try:
            result = CliRunner().invoke(
                app, ["data", "fetch", "-s", "nevis22-short", "-d", "imagenet2012"], env={"COLUMNS": "250"}
            )
        finally:
            get_settings.cache_clear()
        asked = sorted(p for p, _ in server.requests)
    assert asked == ["/m/imagenet2012/ILSVRC2012_img_train.tar", "/m/imagenet2012/ILSVRC2012_img_val.tar"]
    assert isinstance(result.exception, DataIntegrityError)
    text = " ".join(result.stdout.split())
    assert "mirror first: " + server.url("/m") in text
    assert "needs a manual download" in text and "HTTP 404 Not Found from" in text
    assert "mismatch: expected sha256:c7e06a6c0baccf06" in text  # the mirror's wrong copy, refused
    assert not (settings_env / "sources" / "imagenet2012" / "ILSVRC2012_img_val.tar").exists()
