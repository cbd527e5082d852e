"""The near-floor and estimated-CPU marks are stored and read back (issue 44, revision 0024):
a trial whose own count lies within NEVIS_NEAR_FLOOR_BAND × its floor is stored as
``near_floor`` (charged its count, marked), its task result and the submission's scores row
say so, and a CPU time estimated from wall time × declared CPUs stays marked."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db import sessions_on, transaction
from services.store.db.models import StreamVersion, Trial
from services.store.db.models_scores import SubmissionScore
from services.store.runs import records
from services.store.runs.outcomes import NEAR_FLOOR_BAND, NEAR_FLOOR_MIN_CPU_S, TaskOutcome, TrialOutcome
from services.store.runs.summary import load_summary
from tests.support.synthetic_results import seed_results

FLOOR = 1_000_000


def outcome(counted: int, *, index: int = 0, band: float = NEAR_FLOOR_BAND, estimated: bool = False) -> TrialOutcome:
    return TrialOutcome(
        trial_index=index,
        seed=0,
        status="ok",
        flops_measured=counted,
        dev_error=0.5,
        cpu_seconds=10.0,
        flops_floor=FLOOR,
        cpu_estimated=estimated,
        near_floor_band=band,
    )


@pytest.mark.parametrize(
    ("counted", "source", "charged"),
    [
        (FLOOR // 2, "floor", FLOOR),  # below the floor: the floor is charged
        (FLOOR + 1, "near_floor", FLOOR + 1),  # topped up to just over it: its count, marked
        (int(NEAR_FLOOR_BAND * FLOOR) - 1, "near_floor", int(NEAR_FLOOR_BAND * FLOOR) - 1),
        (int(NEAR_FLOOR_BAND * FLOOR), "measured", int(NEAR_FLOOR_BAND * FLOOR)),  # the band's edge: not marked
    ],
)
def test_a_count_within_the_band_above_its_floor_is_marked_near_floor(counted, source, charged):
    trial = outcome(counted)
    assert (trial.flops_source, trial.flops) == (source, charged)


def test_the_band_is_the_setting_the_runner_passes():
    assert outcome(3 * FLOOR).near_floor
    assert not outcome(3 * FLOOR, band=2.0).near_floor
    assert not TrialOutcome(trial_index=0, seed=0, status="ok", flops_measured=5).near_floor  # no floor: no mark


def test_a_trial_under_a_cpu_second_is_too_small_to_mark():
    """Start-up dominates a tiny trial's CPU time: an honest one would be marked for it."""
    tiny = replace(outcome(2 * FLOOR), cpu_seconds=NEAR_FLOOR_MIN_CPU_S / 2)
    assert tiny.flops_source == "measured" and not tiny.near_floor
    assert replace(tiny, cpu_seconds=NEAR_FLOOR_MIN_CPU_S).near_floor


def test_marks_are_stored_and_shown_in_the_summary_and_scores(database_url):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        seed_results(session, submissions=0, tasks=2, meta_test_from=2, stream="marks", version="v1")
        version = session.scalars(select(StreamVersion).where(StreamVersion.name == "marks")).one()
        submission = records.create_submission(
            session,
            learner=records.ensure_learner(session, spec="indep", resources={}),
            stream_version=version,
            phase="meta_test",
            budget=RunBudget(),
            image_size=32,
            first_order=1,
        )
        task = records.stream_task(session, stream_version_id=version.id, order=2)
        run = records.start_task_run(session, submission=submission, task=task)
        topped = outcome(FLOOR + 1, estimated=True)
        best = records.record_trial(session, task_run_id=run.id, outcome=topped)
        records.commit_task(
            session,
            submission=submission,
            run=run,
            best_trial=best,
            outcome=TaskOutcome(
                order=2,
                best_trial_index=0,
                error=0.25,
                split="test",
                metric="accuracy",
                flops=float(topped.flops),
                wall_time_s=1.0,
                peak_memory_bytes=0,
                state_key="state-2",
                cpu_seconds=10.0,
                flops_near_floor=topped.near_floor,
                cpu_estimated=topped.cpu_estimated,
            ),
            next_order=None,
        )
        submission_id = submission.id
    with sessions() as session:
        trial = session.scalars(select(Trial)).one()
        assert (trial.flops_source, trial.cpu_estimated, trial.flops) == ("near_floor", True, FLOOR + 1)
        score = session.get(SubmissionScore, submission_id)
        assert score.near_floor_tasks == 1 and score.floored_tasks == 0
        summary = load_summary(session, submission_id=submission_id)
    row = next(t for t in summary.tasks if t.order == 2)
    assert row.flops_near_floor and row.cpu_estimated and not row.flops_floored
    assert summary.near_floor and "near_floor" in summary.flops_sources
    assert summary.to_dict()["near_floor"] is True
