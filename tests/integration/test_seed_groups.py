"""Leaderboard seed groups (issue 47): the spread "over seeds" beside a row pools only runs of
its configuration (learner, budget, image size, options digest), on the board's rows and in its
uncertainty block, on both databases."""

from __future__ import annotations

import statistics

import pytest
from sqlalchemy import update

from services.store.db import sessions_on, transaction
from services.store.db.models import Submission
from services.store.objects import open_store
from services.store.runs.board_uncertainty import board_uncertainty
from services.store.runs.leaderboard import leaderboard
from tests.support.synthetic_results import seed_results


def test_two_configurations_of_one_learner_are_not_pooled(database_url, tmp_path):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=12, tasks=6, seed=5)  # 3 learners × 4 seeds
    with sessions() as session:
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
    runs = sorted(r.submission_id for r in page.rows if r.learner == page.rows[0].learner)
    assert len(runs) == 4 and all(r.runs_of_learner == 4 for r in page.rows)  # one configuration each: pooled
    bigger, larger_images = runs[2:], runs[1]
    with transaction(sessions) as session:  # two seeds of another budget, and one at another image size
        session.execute(
            update(Submission)
            .where(Submission.id.in_(bigger))
            .values(budget={"trials": 16, "steps": 50_000, "seed": 7})
        )
        session.execute(update(Submission).where(Submission.id == larger_images).values(image_size=64))
    with sessions() as session:
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
        spread = board_uncertainty(session, open_store(f"file://{tmp_path / 'store'}"), page)
    rows = {r.submission_id: r for r in page.rows}
    errors = {i: rows[i].mean_error for i in runs}
    for i in bigger:
        assert rows[i].runs_of_learner == 2
        assert rows[i].learner_e_std == pytest.approx(statistics.stdev(errors[j] for j in bigger))
        assert spread[i].seeds.runs == 2 and spread[i].seeds.mean == pytest.approx(sum(errors[j] for j in bigger) / 2)
    assert (rows[larger_images].runs_of_learner, rows[larger_images].learner_e_std) == (1, None)
    assert spread[larger_images].seeds is None and spread[runs[0]].seeds is None  # no second seed of their own
    others = [r for r in page.rows if r.learner != rows[runs[0]].learner]
    assert all(r.runs_of_learner == 4 and spread[r.submission_id].seeds.runs == 4 for r in others)
