"""Performance-profile scores within each ruleset (issue 50): every ruleset's board is profiled on
its own, so a row's profile score compares it with the rows it competes with, never with runs
under other rules; as kept for anonymous readers and as computed for an admin alike."""

from __future__ import annotations

import pytest

from tests.integration.coordinator.test_refreshes import finish, learner, sessions, submit  # noqa: F401 - sessions: a fixture


def test_each_rulesets_board_scores_its_rows_among_themselves(client, tokens, sessions):  # noqa: F811
    alice = learner(client, tokens, "alice")
    runs = {}
    for name, ruleset, error in (
        ("open_run", "open", 0.30),
        ("tiered", "budget-1e12", 0.50),
        ("other", "budget-1e12", 0.60),
    ):
        runs[name] = submit(client, tokens, "alice", alice, ruleset=ruleset)
        finish(sessions, runs[name], error)  # within alice's two at once
    open_run, tiered, other = runs["open_run"], runs["tiered"], runs["other"]
    for who in ("bob", "admin"):  # bob reads the kept scores; an admin's are computed for him
        scores = {}
        for ruleset in ("open", "budget-1e12"):
            board = client.get(
                "/v1/leaderboard", params={"stream": "tiny2", "ruleset": ruleset}, headers=tokens.auth(who)
            ).json()
            scores |= {r["submission_id"]: r["profile_score"] for r in board["items"]}
        assert scores[open_run] == pytest.approx(1.0)  # alone under open: the best there on every task
        assert scores[tiered] == pytest.approx(1.0)  # the best of budget-1e12, though open's run has a lower E
        assert scores[other] < scores[tiered]
