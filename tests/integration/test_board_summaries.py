"""The leaderboard's kept rows (``submission_intervals``, ``submission_profiles``,
``learner_seeds``) on both databases: after commits (a live run's, the one that finishes it, a changed result of a
finished run) they equal a recomputation from the results; the run's end keeps its interval on
the row and the board reads it; revisions 0019 and 0020 back-fill the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.core.predictions import encode
from services.store.db import make_engine, session_factory, sessions_on, transaction
from services.store.db.migrate import downgrade, upgrade
from services.store.db.models import Learner, StreamTask, StreamVersion, Submission, TaskResult
from services.store.db.models_scores import LearnerSeeds, SubmissionInterval, SubmissionProfile, SubmissionScore
from services.store.objects import LocalObjectStore
from services.store.runs import records
from services.store.runs.board_front import front_points
from services.store.runs.board_uncertainty import board_uncertainty
from services.store.runs.leaderboard import leaderboard
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from services.store.runs.predictions import committed_attempts, predictions_key
from services.store.runs.profiles import BEST_CURVES, kept_profiles, profiles_of
from services.store.runs.scores import rescore
from services.store.runs.uncertainty import keep_run_interval, run_interval_of
from services.store.runs.visibility import ADMIN
from tests.support.synthetic_results import seed_results

TASKS = 6  # meta-test from order 6: one headline task


def _commit(session, version_id: int, submission_id: int | None, order: int, error: float) -> int:
    """Commit ``order`` of ``submission_id`` (a new indep run when None), as the runner does."""
    if submission_id is None:
        submission = records.create_submission(
            session,
            learner=records.ensure_learner(session, spec="indep", resources={}),
            stream_version=session.get(StreamVersion, version_id),
            phase="meta_test",
            budget=RunBudget(),
            image_size=32,
            first_order=1,
        )
    else:
        submission = session.get(Submission, submission_id)
    task = records.stream_task(session, stream_version_id=version_id, order=order)
    run = records.start_task_run(session, submission=submission, task=task)
    trial = records.record_trial(
        session,
        task_run_id=run.id,
        outcome=TrialOutcome(trial_index=0, seed=0, status="ok", flops_measured=10**9 * order, dev_error=error),
    )
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
            state_key=f"s-{order}",
        ),
        next_order=order + 1 if order < TASKS else None,
    )
    return submission.id


def assert_kept_rows_are_recomputed(session, stream) -> None:
    """Every kept row equals what a render computed before they were kept."""
    points = front_points(session, stream=stream.stream, version=stream.version)
    full = profiles_of(session, points, stream=stream.stream, version=stream.version, tau_max=4.0)
    kept = {r.submission_id: r for r in session.scalars(select(SubmissionProfile))}
    assert kept.keys() == {r.submission_id for r in full.rows} and kept
    for rank, row in enumerate(full.rows):
        mine = kept[row.submission_id]
        assert (mine.error_score, mine.cflop_score) == (row.error_score, row.cflop_score)  # the same floats
        assert mine.error_curve == (row.error_curve if rank < BEST_CURVES else None)
    board = kept_profiles(session, stream=stream.stream, version=stream.version)
    assert board.taus == full.taus
    assert board.best == [(r.submission_id, r.learner, r.error_curve) for r in full.rows[:BEST_CURVES]]
    attempts = {r.submission_id: [tuple(a) for a in r.attempts] for r in session.scalars(select(SubmissionInterval))}
    ids = set(session.scalars(select(TaskResult.submission_id).join(StreamTask).where(StreamTask.phase == "meta_test")))
    assert attempts.keys() == ids
    finished = session.execute(  # every finished public run's E, per learner, by id
        select(Learner.name, SubmissionScore.mean_error)
        .join(Submission, Submission.learner_id == Learner.id)
        .join(SubmissionScore, SubmissionScore.submission_id == Submission.id)
        .where(SubmissionScore.headline_done == 1, Submission.visibility == "public")
        .order_by(Submission.id)
    ).all()
    expected: dict[str, list[float]] = {}
    for name, error in finished:
        expected.setdefault(name, []).append(error)
    seeds = {
        name: errors
        for name, errors in session.execute(
            select(Learner.name, LearnerSeeds.errors).join(Learner, Learner.id == LearnerSeeds.learner_id)
        )
    }
    assert seeds == expected and len(seeds) >= 3
    headline = set(session.scalars(select(StreamTask.order).where(StreamTask.phase == "meta_test")))
    for submission_id in ids:  # the headline tasks' committed attempts, by order
        assert attempts[submission_id] == sorted(
            (order, attempt)
            for order, attempt in committed_attempts(session, submission_id=submission_id).items()
            if order in headline
        )


def test_kept_rows_equal_a_recomputation_after_commits(database_url):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=14, tasks=TASKS, seed=4)
        version_id = session.scalar(select(StreamVersion.id).where(StreamVersion.name == stream.stream))
    with sessions() as session:
        assert_kept_rows_are_recomputed(session, stream)
        before = {r.submission_id: r.error_score for r in session.scalars(select(SubmissionProfile))}
    live = None
    for order in range(1, TASKS + 1):  # a new run, committed task by task: profiles move when it finishes
        with transaction(sessions) as session:
            live = _commit(session, version_id, live, order, error=0.05)
        with sessions() as session:
            kept = {r.submission_id: r.error_score for r in session.scalars(select(SubmissionProfile))}
            assert (live in kept) == (order == TASKS)
            assert (kept == before) == (order < TASKS)  # the best on the headline task: every score moves
            assert_kept_rows_are_recomputed(session, stream)
    worst = min(before, key=before.get)
    with transaction(sessions) as session:  # a finished run's result changes (and is rescored)
        for result in session.scalars(select(TaskResult).where(TaskResult.submission_id == worst)):
            result.error = 0.0
        rescore(session, submission_ids=[worst])
    with sessions() as session:
        assert_kept_rows_are_recomputed(session, stream)
        assert session.get(SubmissionProfile, worst).error_score == 1.0


def test_the_runs_end_keeps_its_interval_on_the_row(database_url, tmp_path):
    sessions = sessions_on(database_url)
    store = LocalObjectStore(tmp_path / "store")
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=3, tasks=TASKS, seed=1)
    run = stream.submission_ids[0]
    with transaction(sessions) as session:  # each task's predictions, 8 + order of 40 wrong, and that error
        for order, attempt in committed_attempts(session, submission_id=run).items():
            labels = np.arange(40) % 4
            predicted = np.where(np.arange(40) < 8 + order, (labels + 1) % 4, labels)
            store.put_bytes(predictions_key(run, order, attempt), encode(np.eye(4)[predicted], labels, "single"))
        for result in session.scalars(select(TaskResult).where(TaskResult.submission_id == run)):
            result.error = (8 + session.get(StreamTask, result.stream_task_id).order) / 40
        rescore(session, submission_ids=[run])
    keep_run_interval(sessions, store, submission_id=run)
    with sessions() as session:
        kept = session.get(SubmissionInterval, run).interval
        expected = run_interval_of(session, store, submission_id=run)
        page = leaderboard(session, stream=stream.stream, version=stream.version)
        shown = board_uncertainty(session, LocalObjectStore(tmp_path / "empty"), page)  # reads the row only
    assert kept is not None and expected.result is not None
    assert shown[run].interval.interval == expected.interval  # the same floats as a recomputation
    assert shown[run].interval.result.task_errors == expected.result.task_errors


def test_revisions_0019_and_0020_back_fill_the_same_rows(database_url):
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=8, tasks=TASKS, seed=2)
    with sessions() as session:
        profiles = {
            r.submission_id: (r.error_score, r.cflop_score, r.error_curve)
            for r in session.scalars(select(SubmissionProfile))
        }
        attempts = {r.submission_id: r.attempts for r in session.scalars(select(SubmissionInterval))}
    engine.dispose()
    downgrade(database_url, "0018")
    upgrade(database_url)
    engine = make_engine(database_url)
    with session_factory(engine)() as session:
        assert {
            r.submission_id: (r.error_score, r.cflop_score, r.error_curve)
            for r in session.scalars(select(SubmissionProfile))
        } == profiles and len(profiles) == 8
        assert {r.submission_id: r.attempts for r in session.scalars(select(SubmissionInterval))} == attempts
        assert_kept_rows_are_recomputed(session, stream)
        assert len(session.scalars(select(LearnerSeeds)).all()) == 3
    engine.dispose()


def test_the_kept_seeds_give_the_spread_a_query_gives(database_url, tmp_path):
    """An anonymous board reads its learners' seeds from the kept rows, an admin's queries them
    (every run here is public, so both see the same runs): the same counts and SDs, with or
    without a date filter (its bound included), and the same seeds' summaries."""
    from datetime import timedelta

    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=30, tasks=TASKS, seed=6)  # 3 learners, 10 runs each
    with sessions() as session:
        created = sorted(session.scalars(select(Submission.created_at)))
        for since, runs in ((None, {10}), (created[11], {6, 7}), (created[11] + timedelta(microseconds=1), {6})):
            kept, queried = (
                leaderboard(session, stream=stream.stream, version=stream.version, since=since, limit=100, **viewer)
                for viewer in ({}, {"viewer": ADMIN})
            )
            spread = {(r.learner, r.runs_of_learner, r.learner_e_std) for r in kept.rows}
            assert spread == {(r.learner, r.runs_of_learner, r.learner_e_std) for r in queried.rows}
            assert {r.runs_of_learner for r in kept.rows} == runs
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
        store = LocalObjectStore(tmp_path / "store")
        anonymous, admin = board_uncertainty(session, store, page), board_uncertainty(session, store, page, ADMIN)
    assert {i: u.seeds for i, u in anonymous.items()} == {i: u.seeds for i, u in admin.items()}
    assert all(u.seeds is not None and u.seeds.runs == 10 for u in anonymous.values())


@pytest.fixture(autouse=True)
def _fresh_interval_memory(monkeypatch):
    """The board remembers intervals per process: each test starts with none."""
    from services.store.runs import board_uncertainty as module

    monkeypatch.setattr(module, "_FINISHED", {})
