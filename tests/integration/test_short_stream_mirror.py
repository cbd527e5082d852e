"""The SHORT stream end to end from a loopback mirror, through the real CLI (issue 21, item 6).

Every SHORT source's fixture archive, in its source's exact layout, is served by a static
loopback HTTP server as ``NEVIS_DATA_MIRROR`` (tests/support/fixture_mirror.py); then, once
per module, ``nevis data fetch``, ``convert`` and ``prepare`` take all 28 sources of the 29
tasks from it into a fresh data folder, and ``nevis run`` runs the first two tasks of the
stream (a manifest of those two, the same datasets and split rules) on the session's Ray.
bench/short_stream_from_mirror.py runs all 29 tasks the same way, as subprocesses.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.store.objects import store_from_settings
from tests.support.fixture_mirror import FixtureMirror, serve_folder, write_fixture_mirror
from workers.stream.manifest import manifest_to_dict
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import stored_image_size
from workers.stream.sources.catalogue import load_catalogue
from workers.stream.task_data import load_task_index

STREAM = "nevis22-short"
WIDE = {"COLUMNS": "250"}
cli = CliRunner()


@dataclass(frozen=True)
class Prepared:
    """The module's data folder after fetch, convert and prepare, and what each printed."""

    data_dir: Path
    mirror: FixtureMirror
    outputs: dict[str, str]


def invoke(*args: str) -> str:
    """One ``nevis`` command in this process (settings re-read); its output, or a failure."""
    get_settings.cache_clear()
    result = cli.invoke(app, list(args), env=WIDE)
    assert result.exit_code == 0, f"nevis {' '.join(args)}:\n{result.output}\n{result.exception!r}"
    return result.stdout


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, sqlite_template_path: Path) -> Iterator[Prepared]:
    """Fetch (from the loopback mirror) and prepare the whole SHORT stream, once: one source
    converted by ``nevis data convert``, the rest by ``prepare``, which converts what was fetched."""
    root = tmp_path_factory.mktemp("short-mirror")
    mirror = write_fixture_mirror(root / "mirror")
    data_dir = root / "data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_template_path, data_dir / "nevis.sqlite")  # migrated once per session
    with pytest.MonkeyPatch.context() as env:
        for name in (
            "NEVIS_DATABASE_URL",
            "NEVIS_STORE_URL",
            "NEVIS_S3_ENDPOINT_URL",
            "NEVIS_RAY_ADDRESS",
            "NEVIS_IMAGE_SIZE",
            "NEVIS_STORED_SCALE",
            "KAGGLE_USERNAME",
            "KAGGLE_KEY",
        ):
            env.delenv(name, raising=False)
        env.setenv("KAGGLE_CONFIG_DIR", str(root / "no-kaggle"))
        env.setenv("NEVIS_DATA_DIR", str(data_dir))
        env.setenv("NEVIS_OFFLINE_DATA_DIR", str(root / "offline"))
        env.setenv("NEVIS_SOURCE_CATALOGUE", str(mirror.catalogue))
        outputs = {}
        with serve_folder(mirror.folder) as url:
            env.setenv("NEVIS_DATA_MIRROR", url)
            outputs["fetch"] = invoke("data", "fetch", "--stream", STREAM)
        # The server is gone from here on: nothing after the fetch may need the network.
        first = sorted(mirror.keys)[0]  # converted by hand; prepare converts the other 27 itself
        # fixtures, not the real sources: their classes and rows differ from the pinned counts
        outputs["convert"] = invoke("data", "convert", "--stream", STREAM, "--datasets", first, "--accept-count-change")
        outputs["prepare"] = invoke("data", "prepare", "--stream", STREAM, "--accept-count-change")
        yield Prepared(data_dir=data_dir, mirror=mirror, outputs=outputs)
    get_settings.cache_clear()


def test_every_short_source_is_fetched_from_the_mirror_and_every_task_is_prepared(prepared: Prepared) -> None:
    manifest = load_stream(STREAM)
    keys = sorted(s.key for s in load_catalogue().for_datasets(manifest.datasets))
    assert keys == sorted(prepared.mirror.keys) and len(keys) == 28 and len(manifest.tasks) == 29
    assert "28 fetched" in " ".join(prepared.outputs["fetch"].split())
    for path in prepared.mirror.files:  # byte for byte what the mirror served
        fetched = prepared.data_dir / "sources" / path.relative_to(prepared.mirror.folder)
        assert fetched.read_bytes() == path.read_bytes(), fetched
    assert "All 1 sources converted or already present." in prepared.outputs["convert"]
    assert "fetched sources converted first" in prepared.outputs["prepare"]
    assert " ".join(prepared.outputs["prepare"].split()).count("│ converted │") == 27  # one table row each
    assert "Prepared 28 dataset(s)" in prepared.outputs["prepare"]
    settings = get_settings()
    store = store_from_settings(settings)
    size = stored_image_size(manifest, settings_size=settings.image_size, settings_explicit=False, override=None)
    for task in manifest.tasks:  # each task's split rule, the recurring MNIST's too, on train and test rows
        index = load_task_index(store, task, image_size=size)
        assert index.counts.get("train") and index.counts.get("test"), (task.order, task.dataset, index.counts)


@pytest.mark.usefixtures("ray_local")
def test_nevis_run_runs_the_first_two_short_tasks_from_the_prepared_data(prepared: Prepared) -> None:
    from services.store.db import sessions_on
    from services.store.runs.summary import load_summary

    short = load_stream(STREAM)
    first_two = replace(short, name="nevis22-short-first2", version=f"{short.version}-first2", tasks=short.tasks[:2])
    path = prepared.data_dir / "first2.json"
    path.write_text(json.dumps(manifest_to_dict(first_two)), encoding="utf-8")
    out = invoke(
        "run", "--stream", str(path), "--learner", "indep_small", "--trials", "1", "--steps", "5", "--checkpoints", "1"
    )
    assert "Run 1:" in out
    with sessions_on(get_settings().database_url)() as session:
        summary = load_summary(session, submission_id=1)
    assert summary.status == "succeeded", summary.message
    assert [(t.order, t.dataset, t.status) for t in summary.tasks] == [
        (1, "nevis:coil100", "committed"),
        (2, "nevis:mnist", "committed"),
    ]
    assert all(t.error is not None and 0.0 <= t.error <= 1.0 for t in summary.tasks)
    assert summary.cflop > 0 and summary.flops_sources == ("measured",)
