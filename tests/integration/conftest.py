"""Integration fixtures: a real local Ray (2 CPUs) and a tiny stream manifest.

The test learners in ``learner_fixtures/`` are put on ``PYTHONPATH`` before Ray starts, so
its worker processes can import them as ``nevis_test_learners:factory``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE_LEARNERS = Path(__file__).parent / "learner_fixtures"


@pytest.fixture(scope="session")
def learner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder on the workers' import path where a test may write a learner module."""
    return tmp_path_factory.mktemp("learners")


@pytest.fixture(scope="session")
def ray_local(learner_dir: Path) -> Iterator[None]:
    """One local Ray instance for the session, started the way the runner starts it."""
    import ray

    from workers.trainer.ray_env import learner_env

    paths = (str(FIXTURE_LEARNERS), str(learner_dir), os.environ.get("PYTHONPATH", ""))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    sys.path[:0] = [str(FIXTURE_LEARNERS), str(learner_dir)]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": learner_env()})
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def close_runners(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop the warm actors of every runner a test made when it ends: the session's one Ray
    instance would otherwise keep each run's executors and learner hosts (about 0.6 GB each)
    alive until their handles are collected, and a suite of runs runs out of memory."""
    from workers.trainer.stream_runner import StreamRunner

    made: list[StreamRunner] = []
    original = StreamRunner.__init__

    def init(self: StreamRunner, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(StreamRunner, "__init__", init)
    yield
    for runner in made:
        runner.close()


@pytest.fixture
def runner(settings_env: Path, database_url: str, monkeypatch: pytest.MonkeyPatch):
    """A StreamRunner on the test's own data folder and database (closed by close_runners)."""
    from services.core.config import get_settings
    from workers.trainer.stream_runner import StreamRunner

    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    return StreamRunner(get_settings())


def tiny_manifest(path: Path, *, tasks: int = 3, image_size: int = 16) -> Path:
    """A stream of procedurally generated shapes tasks (2 meta-train, 1+ meta-test)."""
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    catalogue = [
        (2004, "shapes:shape", "single", 4),
        (2012, "shapes:hue", "single", 6),
        (2020, "shapes:multi", "multi", 4),
        (2021, "shapes:scale", "single", 4),
    ]
    doc = {
        "format": 1, "name": "tiny", "version": "test-1", "description": "test stream",
        "source": "tests", "meta_test_from_year": 2019, "image_size": image_size,
        "tasks": [
            {"order": i + 1, "year": year, "dataset": key, "title": key, "domain": "shape",
             "kind": kind, "num_classes": k, "split": rule}
            for i, (year, key, kind, k) in enumerate(catalogue[:tasks])
        ],
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def tiny_stream(tmp_path: Path) -> Path:
    return tiny_manifest(tmp_path / "tiny.json")
