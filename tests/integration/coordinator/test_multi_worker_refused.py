"""Through the API, under default settings: an uploaded learner declaring two workers never
runs outside its sandbox. The worker harness (a real ``nevis worker`` process started by the
local backend) asks a sandboxed host for the declaration, refuses it, and fails the lease
with an error that names the fix; no trial, task run or checkpoint of it exists."""

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


def test_an_uploaded_two_worker_learner_is_refused_before_any_of_it_trains(client, tokens, coord_settings, tmp_path):
    assert coord_settings.sandbox == "auto"  # the default: nothing here turns the sandbox on by hand
    bundle = learner_bundle(tmp_path)
    with open(bundle, "rb") as handle:
        learner = client.post("/v1/learners/bundle", headers=tokens.auth("alice"),
                              data={"name": "two", "entrypoint": "nevis_test_learners:two_workers"},
                              files={"file": (bundle.name, handle, "application/gzip")})
    assert learner.status_code == 201, learner.text
    sub = client.post("/v1/submissions", headers=tokens.auth("alice"),
                      json={"learner_id": learner.json()["id"], "stream": "tiny2",
                            "budget": {"trials": 1, "steps": 1}})
    assert sub.status_code == 201, sub.text

    engine = make_engine(coord_settings.database_url)
    sessions = session_factory(engine)
    try:
        settings = coord_settings.model_copy(update={"max_attempts": 1})
        scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
        assert scheduler.tick().launched
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            scheduler.tick()
            with sessions() as session:
                lease = session.scalars(select(TaskLease)).first()
                if lease.status not in ACTIVE_LEASE_STATUSES:
                    break
            time.sleep(0.5)
        with sessions() as session:
            lease = session.scalars(select(TaskLease)).first()
            assert lease.status == "failed", (lease.status, lease.error)
            assert "no uploaded bundle or image" in lease.error and "num_workers=1" in lease.error
            assert session.scalar(select(TaskRun.id)) is None and session.scalar(select(Trial.id)) is None
            assert session.get(Submission, sub.json()["id"]).status in ("failed", "queued")
    finally:
        engine.dispose()
