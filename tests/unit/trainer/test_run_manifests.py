"""A runner parses a run version's stored manifest once, not once per task (issue 45 item 6):
the plan every task starts with reads only the version's hash on a hit, on a real database."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from services.core.budget import RunBudget
from services.core.config import get_settings
from services.core.errors import ManifestError
from services.store.db import transaction
from services.store.db.models import StreamVersion
from services.store.runs import records
from workers.stream import versions
from workers.stream.manifest import parse_manifest
from workers.stream.manifest_files import load_stream
from workers.stream.versions import ensure_stream_version
from workers.trainer.stream_runner import StreamRunner


@pytest.fixture
def runner(settings_env, database_url, monkeypatch) -> StreamRunner:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    return StreamRunner(get_settings(), import_paths=())


def _submission(runner: StreamRunner, stream: str = "mini") -> int:
    manifest = load_stream(stream)
    with transaction(runner.sessions) as session:
        version = ensure_stream_version(session, manifest=manifest)
        learner = records.ensure_learner(session, spec="indep_small", resources={})
        submission = records.create_submission(
            session,
            learner=learner,
            stream_version=version,
            phase="meta_test",
            budget=RunBudget(),
            image_size=32,
            first_order=manifest.tasks_of_phase("meta_test")[0].order,
        )
    return submission.id


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Every parse of a stored manifest, by its origin (the parser the stored-manifest reader calls)."""
    seen: list[str] = []

    def counting(doc, *, origin):
        seen.append(origin)
        return parse_manifest(doc, origin=origin)

    monkeypatch.setattr(versions, "parse_manifest", counting)
    return seen


def test_a_run_s_plan_parses_its_manifest_once_for_all_its_tasks(runner, parses) -> None:
    first, second = _submission(runner), _submission(runner)  # two runs of one stream version
    plans = [runner.plan(first) for _ in range(5)] + [runner.plan(second) for _ in range(3)]
    assert len(parses) == 1 and runner.manifests.parses == 1
    assert all(p.manifest is plans[0].manifest for p in plans)
    assert [t.order for t in plans[0].tasks] == [t.order for t in load_stream("mini").tasks_of_phase("meta_test")]


def test_each_stream_version_is_parsed_once(runner, parses) -> None:
    mini, short = _submission(runner, "mini"), _submission(runner, "nevis22-short")
    for _ in range(3):
        assert runner.plan(mini).manifest.name != runner.plan(short).manifest.name
    assert len(parses) == 2


def test_a_version_whose_hash_changed_is_parsed_and_checked_again(runner, parses) -> None:
    run = _submission(runner)
    runner.plan(run)
    with transaction(runner.sessions) as session:
        session.execute(update(StreamVersion).values(manifest_sha256="0" * 64))
    with pytest.raises(ManifestError, match="does not match its recorded hash"):
        runner.plan(run)
    assert len(parses) == 2
