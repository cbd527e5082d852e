"""Hostile learners through ``nevis run``'s runner (the CI-sized part of bench/adversaries.py):
what each obtained must be nothing, and what it spent is charged even when its own count lies.

SQLite only: what is tested is the sandbox and the harness, not the database dialect.
"""

from __future__ import annotations

import pickle

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import TaskRun, Trial
from services.store.objects import open_store
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def obtained_of(state) -> dict:
    """What a hostile learner's saved state says it obtained (empty: nothing)."""
    return dict(state.get("obtained") or {}) if isinstance(state, dict) else {}


def _trials(runner: StreamRunner, submission_id: int) -> list[Trial]:
    with runner.sessions() as session:
        rows = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == submission_id)).all()
        for row in rows:
            session.expunge(row)
        return list(rows)


def _final_state(runner: StreamRunner, submission_id: int):
    with runner.sessions() as session:
        key = session.scalars(
            select(TaskRun.learner_state_key).where(TaskRun.submission_id == submission_id).order_by(TaskRun.id.desc())
        ).first()
    return pickle.loads(open_store(runner.settings.store_url).get_bytes(key))


def test_a_network_counted_by_nobody_is_charged_the_floor_and_marked(runner, tiny_stream):
    """The same MLP through ctx.track and as raw ``x @ W``; and a learner that switches its
    meter off. The raw and the patched runs count (almost) nothing themselves: the harness
    charges the floor their CPU time implies and marks them; the honest run keeps its count."""
    from nevis_hostile_learners import FLOOR_STEPS

    from tests.integration.conftest import tiny_manifest
    from workers.sandbox.metering.calibration import ALLOWANCE_S

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=1, steps=FLOOR_STEPS, checkpoint_fractions=(1.0,))
    runs = {
        name: runner.start(RunRequest(stream=stream, learner=f"nevis_hostile_learners:{name}", budget=budget))
        for name in ("mlp_tracked", "mlp_raw", "meter_patcher")
    }
    trial = {name: _trials(runner, run)[0] for name, run in runs.items()}
    honest = trial["mlp_tracked"]
    print({n: (t.flops, t.flops_floor, t.cpu_seconds, t.flops_source) for n, t in trial.items()})
    assert honest.flops_source != "floor" and honest.cpu_seconds > 0 and honest.flops > honest.flops_floor
    for name in ("mlp_raw", "meter_patcher"):
        assert trial[name].status == "succeeded", trial[name].traceback
        assert trial[name].cpu_seconds > ALLOWANCE_S, f"{name}: too little work to floor; raise FLOOR_STEPS"
        assert trial[name].flops_source == "floor", (name, trial[name].flops, trial[name].flops_floor)
        assert trial[name].flops == trial[name].flops_floor > 0
    with runner.sessions() as session:
        from services.store.db.models import TaskResult

        floored = dict(session.execute(select(TaskResult.submission_id, TaskResult.flops_floored)).all())
    assert floored == {runs["mlp_tracked"]: False, runs["mlp_raw"]: True, runs["meter_patcher"]: True}


def test_a_count_topped_up_to_just_over_the_floor_is_marked_near_floor(runner, tiny_stream):
    """Raw arithmetic, then a report of twice the floor the learner expects (issue 44, finding
    5): charged its own count but marked, as the floor itself would be (never stored as
    ``measured`` or ``reported`` with a count under NEVIS_NEAR_FLOOR_BAND × its floor)."""
    from nevis_hostile_learners import FLOOR_STEPS

    from tests.integration.conftest import tiny_manifest
    from workers.sandbox.metering.calibration import ALLOWANCE_S

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    budget = RunBudget(trials=1, steps=FLOOR_STEPS, checkpoint_fractions=(1.0,))
    run = runner.start(RunRequest(stream=stream, learner="nevis_hostile_learners:floor_topper", budget=budget))
    [trial] = _trials(runner, run)
    assert trial.status == "succeeded", trial.traceback
    assert trial.cpu_seconds > ALLOWANCE_S, "too little work to floor; raise FLOOR_STEPS"
    assert trial.flops_source in ("near_floor", "floor"), (trial.flops, trial.flops_floor, trial.flops_source)
    assert trial.flops >= trial.flops_floor > 0
    with runner.sessions() as session:
        from services.store.db.models import TaskResult
        from services.store.runs.summary import load_summary

        result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run)).one()
        summary = load_summary(session, submission_id=run)
        from services.store.runs.transfer_record import MAX_RECORD_BYTES, latest_record_key

        record = latest_record_key(session, submission_id=run)
    assert runner.store.info(record).size <= MAX_RECORD_BYTES  # the transfer record, kept at commit
    assert (result.flops_near_floor, result.flops_floored) == (
        trial.flops_source == "near_floor",
        trial.flops_source == "floor",
    )
    assert summary.near_floor or summary.flops_floored


def test_evaluation_images_are_gone_when_the_learner_next_trains(runner, tiny_stream):
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,))
    run = runner.start(RunRequest(stream=str(tiny_stream), learner="nevis_hostile_learners:hoarder", budget=budget))
    state = _final_state(runner, run)
    assert state["tasks_seen"] == [1, 2, 3] and obtained_of(state) == {}


def test_ram_folders_and_the_process_table_stop_at_their_caps(runner, tiny_stream):
    """(A forged frame and a silent learner are tried in tests/unit/sandbox: test_wire_hostile,
    test_host_limits; bench/adversaries.py runs every adversary end to end.)"""
    from tests.integration.conftest import tiny_manifest

    stream = str(tiny_manifest(tiny_stream.parent / "one.json", tasks=1))
    run = runner.start(
        RunRequest(
            stream=stream,
            learner="nevis_hostile_learners:resource_hog",
            budget=RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,)),
        )
    )
    state = _final_state(runner, run)
    assert obtained_of(state) == {}
    assert 0 < state["written"]["/tmp"] <= 2 << 30 and 0 < state["forked"] < 1000
