"""A benchmark refresh re-runs a pinned submission under its own ruleset (issue 50): the copy
plays by the same rules and sits on the same ruleset's board; a run of the same learner under
another ruleset is not the same work. Baselines are listed with a ruleset each (``name@ruleset``)
to have a row on each ruleset's board."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.coordinator.common.config import CoordinatorSettings
from services.store.db.models import Submission
from tests.integration.coordinator.test_refreshes import bump, learner, refresh, sessions, submit  # noqa: F401 - sessions: a fixture


def test_a_refresh_copies_the_pinned_submissions_ruleset(client, tokens, coord_settings, sessions):  # noqa: F811
    bob = learner(client, tokens, "bob")
    tiered = submit(client, tokens, "bob", bob, pinned=True, ruleset="budget-1e12-total-5e12")
    bump(coord_settings.streams_dir, "tiny2", "test-2")
    submit(client, tokens, "bob", bob)  # bob's learner under open on test-2: not the pinned run's work
    outcome = refresh(sessions, coord_settings)
    with sessions() as session:
        copies = session.scalars(
            select(Submission).where(Submission.id.in_(outcome.queued), Submission.learner_id == bob)
        ).all()
        assert [(c.ruleset, c.budget["flop_cap"]) for c in copies] == [("budget-1e12-total-5e12", 5e12)]
        assert copies[0].id != tiered


def test_a_refresh_queues_each_baseline_under_each_ruleset_it_is_listed_with(kit, coord_settings, sessions):  # noqa: F811
    listed = "indep_small,indep_small@budget-1e12,indep_small@self-tuning"
    settings = coord_settings.model_copy(update={"refresh_baselines": listed, "refresh_budget": '{"trials": 2}'})
    bump(settings.streams_dir, "tiny2", "test-2")
    outcome = refresh(sessions, settings)
    with sessions() as session:
        rows = session.scalars(select(Submission).where(Submission.id.in_(outcome.queued))).all()
        assert sorted((r.learner.entrypoint, r.ruleset, r.budget["trials"]) for r in rows) == [
            ("indep_small", "budget-1e12", 2),
            ("indep_small", "open", 2),
        ]
    # self-tuning refuses an asked-for search: skipped, and the refresh says why
    assert "baseline 'indep_small@self-tuning' skipped: The 'trials' of a budget must be 1" in outcome.refresh.note


@pytest.mark.parametrize(
    "listed, words",
    [
        ("indep@budget", "needs its cap"),
        ("indep@opne", "Did you mean 'open'?"),
        ("Indep@open", "built-in learner names"),
    ],
)
def test_a_baseline_with_an_unknown_ruleset_is_refused_at_startup(kit, coord_settings, listed, words):
    with pytest.raises(ValueError, match=words.replace("?", r"\?")):
        CoordinatorSettings(**{**coord_settings.model_dump(), "refresh_baselines": listed})
