"""A benchmark refresh re-runs a pinned submission under its own ruleset (issue 50): the copy
plays by the same rules and sits on the same ruleset's board; a run of the same learner under
another ruleset is not the same work."""

from __future__ import annotations

from sqlalchemy import select

from services.store.db.models import Submission
from tests.integration.coordinator.test_refreshes import bump, learner, refresh, sessions, submit  # noqa: F401 - sessions: a fixture



def test_a_refresh_copies_the_pinned_submissions_ruleset(client, tokens, coord_settings, sessions):  # noqa: F811
    bob = learner(client, tokens, "bob")
    tiered = submit(client, tokens, "bob", bob, pinned=True, ruleset="budget-1e12-total-5e12")
    bump(coord_settings.streams_dir, "tiny2", "test-2")
    submit(client, tokens, "bob", bob)  # bob's learner under open on test-2: not the pinned run's work
    outcome = refresh(sessions, coord_settings)
    with sessions() as session:
        copies = session.scalars(select(Submission).where(Submission.id.in_(outcome.queued),
                                                          Submission.learner_id == bob)).all()
        assert [(c.ruleset, c.budget["flop_cap"]) for c in copies] == [("budget-1e12-total-5e12", 5e12)]
        assert copies[0].id != tiered
