"""Through the API, under default settings: an uploaded learner declaring two workers trains as
sandboxed ranks (issue 46), one learner host per rank under bubblewrap, in a real ``nevis
worker`` process started by the local backend; before, it was refused (the file keeps its name
for history's sake)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from services.coordinator.backends.local import LocalBackend
from services.coordinator.scheduler.loop import Scheduler
from services.store.db import make_engine, session_factory
from services.store.db.models import Submission, TaskRun, Trial
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, TaskLease
from tests.integration.coordinator.conftest import learner_bundle

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_an_uploaded_two_worker_learner_trains_as_sandboxed_ranks(client, tokens, coord_settings, tmp_path):
    assert coord_settings.sandbox == "auto"  # the default: bwrap here, nothing turned on by hand
    bundle = learner_bundle(tmp_path)
    with open(bundle, "rb") as handle:
        learner = client.post(
            "/v1/learners/bundle",
            headers=tokens.auth("alice"),
            data={"name": "two", "entrypoint": "nevis_test_learners:two_workers"},
            files={"file": (bundle.name, handle, "application/gzip")},
        )
    assert learner.status_code == 201, learner.text
    sub = client.post(
        "/v1/submissions",
        headers=tokens.auth("alice"),
        json={"learner_id": learner.json()["id"], "stream": "tiny2", "budget": {"trials": 1, "steps": 1}},
    )
    assert sub.status_code == 201, sub.text

    engine = make_engine(coord_settings.database_url)
    sessions = session_factory(engine)
    try:
        settings = coord_settings.model_copy(update={"max_attempts": 1})
        scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
        assert scheduler.tick().launched
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            scheduler.tick()
            with sessions() as session:
                if session.get(Submission, sub.json()["id"]).status in ("succeeded", "failed"):
                    break
            time.sleep(0.5)
        with sessions() as session:
            leases = session.scalars(select(TaskLease)).all()
            assert leases and all(lease.status not in ACTIVE_LEASE_STATUSES for lease in leases)
            assert [lease.status for lease in leases if lease.status != "succeeded"] == [], [
                (lease.status, lease.error) for lease in leases
            ]
            trials = session.scalars(select(Trial)).all()
            assert trials and all(t.status == "succeeded" for t in trials), [t.traceback for t in trials]
            assert session.scalar(select(TaskRun.id)) is not None
            assert session.get(Submission, sub.json()["id"]).status == "succeeded"
    finally:
        engine.dispose()
