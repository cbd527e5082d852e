"""The leaderboard's summary rows (``submission_scores``) on both databases: after every path
that writes results (commits, a failed attempt and its retry, an interrupted attempt, a failed
run, a capped run, a meta-train run, a resumed run) each row is the full SQL aggregate of the
submission's results; revision 0017 back-fills the same rows; on PostgreSQL two transactions
committing to one submission at once leave the aggregate of both."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import select, text

from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, sessions_on, transaction
from services.store.db.migrate import downgrade, upgrade
from services.store.db.models import StreamVersion, Submission
from services.store.db.models_scores import SubmissionScore
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from services.store.runs.scores import COLUMNS, aggregate
from tests.support.synthetic_results import seed_results


def _stored(session) -> dict[int, tuple]:
    rows = session.execute(select(*(getattr(SubmissionScore, c) for c in COLUMNS))).all()
    return {row[0]: tuple(row) for row in rows}


def _aggregated(session) -> dict[int, tuple]:
    return {row[0]: tuple(row) for row in session.execute(aggregate()).all()}


def assert_scores_are_the_aggregate(session) -> dict[int, tuple]:
    """Every summary row equals the aggregate of its submission's results, and every
    submission with results has one."""
    stored = _stored(session)
    assert_same(stored, _aggregated(session))
    return stored


def assert_same(kept: dict[int, tuple], full: dict[int, tuple]) -> None:
    """The same rows: counts exact, sums to the last bits (the database adds in its own order)."""
    assert kept.keys() == full.keys()
    for submission_id, row in full.items():
        mine = kept[submission_id]
        assert mine[:2] == row[:2] and mine[5:7] == row[5:7]  # id, tasks, floored, headline
        for a, b in zip(mine[2:5] + mine[7:], row[2:5] + row[7:], strict=True):  # NULL stays NULL
            assert (a is None) == (b is None) and (a is None or a == pytest.approx(b, rel=1e-12))


def _stream(session) -> StreamVersion:
    seed_results(session, submissions=0, tasks=5, meta_test_from=4, stream="scores", version="v1")
    return session.scalars(select(StreamVersion).where(StreamVersion.name == "scores")).one()


def _submission(
    session,
    version: StreamVersion,
    *,
    phase: str = "meta_test",
    budget: RunBudget | None = None,
    learner: str = "indep",
) -> Submission:
    return records.create_submission(
        session,
        learner=records.ensure_learner(session, spec=learner, resources={}),
        stream_version=version,
        phase=phase,
        budget=budget or RunBudget(),
        image_size=32,
        first_order=1,
    )


def _attempt(
    session, submission: Submission, order: int, *, flops: int = 1000, cpu: float | None = None, floor: int = 0
):
    task = records.stream_task(session, stream_version_id=submission.stream_version_id, order=order)
    run = records.start_task_run(session, submission=submission, task=task)
    trial = records.record_trial(
        session,
        task_run_id=run.id,
        outcome=TrialOutcome(
            trial_index=0, seed=0, status="ok", flops_measured=flops, dev_error=0.5, cpu_seconds=cpu, flops_floor=floor
        ),
    )
    return run, trial


def _commit(
    session,
    submission: Submission,
    order: int,
    error: float,
    *,
    next_order: int | None,
    paper: float | None = 10.0,
    cpu: float | None = None,
    floored: bool = False,
    attempt=None,
) -> None:
    run, trial = attempt or _attempt(session, submission, order, cpu=cpu, floor=10**9 if floored else 0)
    records.commit_task(
        session,
        submission=submission,
        run=run,
        best_trial=trial,
        outcome=TaskOutcome(
            order=order,
            best_trial_index=0,
            error=error,
            split="test",
            metric="accuracy",
            flops=float(trial.flops),
            wall_time_s=1.0,
            peak_memory_bytes=0,
            state_key=f"state-{order}",
            cpu_seconds=cpu,
            flops_floored=floored,
            flops_paper=paper,
            flops_prediction=None if paper is None else 1.0,
        ),
        next_order=next_order,
    )


def test_every_path_that_writes_results_leaves_the_aggregate(database_url):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        version = _stream(session)
        done = _submission(session, version)  # all five tasks; the fourth's first attempt fails
        for order in (1, 2, 3):
            _commit(
                session,
                done,
                order,
                0.1 * order,
                next_order=order + 1,
                cpu=2.0 if order == 2 else None,
                floored=order == 3,
            )
        failed_attempt, _ = _attempt(session, done, 4)
        failed_attempt.status = "failed"
        _commit(session, done, 4, 0.3, next_order=5)  # the retry, a second attempt
        _commit(session, done, 5, 0.5, next_order=None, paper=None)  # stored before FLOPs were split
        empty = _submission(session, version, learner="ft_prev")  # no result: no row
        tuning = _submission(session, version, phase="meta_train")  # headline: meta-train tasks
        _commit(session, tuning, 1, 0.2, next_order=2)
        capped = _submission(session, version, budget=RunBudget(flop_cap=1.0))  # stopped after one task
        _commit(session, capped, 1, 0.4, next_order=2)
        broken = _submission(session, version, learner="contrib.learner:make")  # fails on its second task
        _commit(session, broken, 1, 0.6, next_order=2)
        run, _ = _attempt(session, broken, 2)
        records.fail_task(session, submission=broken, run=run, message="every trial failed", task_flops=5.0)
        interrupted = _submission(session, version, learner="other")  # interrupted, then resumed
        _commit(session, interrupted, 1, 0.7, next_order=2)
        run, _ = _attempt(session, interrupted, 2)
        records.interrupt_task(session, submission=interrupted, run=run)
        session.flush()
        ids = {
            name: s.id
            for name, s in (
                ("done", done),
                ("empty", empty),
                ("tuning", tuning),
                ("capped", capped),
                ("broken", broken),
                ("interrupted", interrupted),
            )
        }
    with transaction(sessions) as session:  # the resume, in a later transaction
        interrupted = session.get(Submission, ids["interrupted"])
        interrupted.status = "running"
        _commit(session, interrupted, 4, 0.9, next_order=5)  # meta-test: its first headline task
    with sessions() as session:
        stored = assert_scores_are_the_aggregate(session)
        assert session.get(Submission, ids["capped"]).status == "stopped"
    assert ids["empty"] not in stored
    # (id, tasks, cflop, paper, cpu, floored, headline, E, inconsistent)
    assert stored[ids["done"]][1] == 5 and stored[ids["done"]][3] is None and stored[ids["done"]][4] == 2.0
    assert stored[ids["done"]][5:7] == (1, 2) and stored[ids["done"]][7] == pytest.approx(0.4)
    assert stored[ids["tuning"]][6:8] == (1, pytest.approx(0.2))
    assert stored[ids["capped"]][6:8] == (0, None) and stored[ids["capped"]][3] == 10.0
    assert stored[ids["broken"]][1] == 1
    assert stored[ids["interrupted"]][1] == 2 and stored[ids["interrupted"]][6:8] == (1, pytest.approx(0.9))


def test_the_migration_back_fills_the_rows_the_commits_keep(database_url):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        seed_results(session, submissions=7, tasks=6, seed=2)
        version = _stream(session)
        partial = _submission(session, version, phase="meta_train")
        _commit(session, partial, 1, 0.25, next_order=2, cpu=1.5, floored=True)
    with sessions() as session:
        before = assert_scores_are_the_aggregate(session)
    assert len(before) == 8
    downgrade(database_url, "0016")
    upgrade(database_url)
    with sessions() as session:
        assert_same(assert_scores_are_the_aggregate(session), before)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite serializes writers: no overlap to test
def test_concurrent_commits_to_one_submission_leave_both_results(database_url):
    """The second transaction waits for the first (the submission's row lock) and then
    aggregates what the first committed: neither result is lost from the row."""
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    with transaction(sessions) as session:
        version = _stream(session)
        submission_id = _submission(session, version).id
        attempts = [_attempt(session, session.get(Submission, submission_id), order) for order in (4, 5)]
        run_ids = [(run.id, trial.id) for run, trial in attempts]

    def commit(session, index: int) -> None:
        from services.store.db.models import TaskRun, Trial

        run_id, trial_id = run_ids[index]
        submission = session.get(Submission, submission_id)
        _commit(
            session,
            submission,
            index + 4,
            0.2 + index / 10,
            next_order=None,
            attempt=(session.get(TaskRun, run_id), session.get(Trial, trial_id)),
        )

    first = sessions()
    commit(first, 0)  # flushed and locked, not committed
    failures: list[BaseException] = []

    def second() -> None:
        try:
            with transaction(sessions) as session:
                commit(session, 1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    deadline = time.monotonic() + 30
    with engine.connect() as watcher:  # until the second waits for the first's lock
        while (
            watcher.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            ).scalar_one()
            == 0
        ):
            assert thread.is_alive() and time.monotonic() < deadline, failures
            time.sleep(0.05)
    first.commit()
    first.close()
    thread.join(30)
    assert not failures
    with sessions() as session:
        stored = assert_scores_are_the_aggregate(session)
    assert stored[submission_id][1] == 2 and stored[submission_id][7] == pytest.approx(0.25)
