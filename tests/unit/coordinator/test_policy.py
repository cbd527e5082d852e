"""The scheduler's decisions, without a database or a cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.coordinator.scheduler.policy import ExpiryKind, LeasePolicy, LeaseView, RetryAction, RetryPolicy, Verdict

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
POLICY = LeasePolicy(heartbeat_timeout_s=60)


def _lease(status: str, *, beat_ago: float = 0, deadline_in: float = 100) -> LeaseView:
    return LeaseView(status, NOW - timedelta(seconds=beat_ago), NOW + timedelta(seconds=deadline_in))


@pytest.mark.parametrize(
    ("lease", "verdict", "kind"),
    [
        (_lease("launched"), Verdict.KEEP, None),
        (_lease("launching", beat_ago=3600), Verdict.KEEP, None),  # waiting to start: only the deadline counts
        (_lease("launched", deadline_in=0), Verdict.EXPIRE, ExpiryKind.NOT_STARTED),
        (_lease("running", beat_ago=59), Verdict.KEEP, None),
        (_lease("running", beat_ago=61), Verdict.EXPIRE, ExpiryKind.HEARTBEAT),
        (_lease("running", deadline_in=-1), Verdict.EXPIRE, ExpiryKind.DEADLINE),
        (_lease("running", beat_ago=61, deadline_in=-1), Verdict.EXPIRE, ExpiryKind.DEADLINE),
        (_lease("succeeded", beat_ago=10_000, deadline_in=-10_000), Verdict.KEEP, None),
    ],
)
def test_lease_judgements(lease, verdict, kind):
    judgement = POLICY.judge(lease, NOW)
    assert (judgement.verdict, judgement.kind) == (verdict, kind)
    if verdict is Verdict.EXPIRE:
        assert "NEVIS_" in judgement.reason  # names the setting to change


def test_backoff_doubles_up_to_the_cap_then_gives_up():
    policy = RetryPolicy(max_attempts=5, backoff_base_s=10, backoff_max_s=30)
    decisions = [policy.decide(attempt=a) for a in range(1, 6)]
    assert [d.action for d in decisions] == [RetryAction.RETRY] * 4 + [RetryAction.FAIL]
    assert [d.delay_s for d in decisions[:4]] == [10, 20, 30, 30]


def test_a_failure_that_would_repeat_is_not_retried():
    policy = RetryPolicy(max_attempts=3, backoff_base_s=1, backoff_max_s=1)
    assert policy.decide(attempt=1, retryable=False).action is RetryAction.FAIL


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_attempts": 0, "backoff_base_s": 1, "backoff_max_s": 1}, "max_attempts"),
        ({"max_attempts": True, "backoff_base_s": 1, "backoff_max_s": 1}, "max_attempts"),
        ({"max_attempts": 2, "backoff_base_s": 5, "backoff_max_s": 1}, "backoff"),
    ],
)
def test_retry_policy_checks_its_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        RetryPolicy(**kwargs)


def test_the_launch_budget_is_its_own_policy(tmp_path):
    from services.coordinator.common.config import CoordinatorSettings
    from services.coordinator.scheduler.policy import launch_retry_policy, retry_policy

    settings = CoordinatorSettings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path}/x.db",
        max_attempts=2,
        max_launch_failures=5,
        backoff_base_s=1.0,
        backoff_max_s=4.0,
    )
    assert settings.max_launch_failures == 5 and settings.cluster_slots is None
    launches, tasks = launch_retry_policy(settings), retry_policy(settings)
    assert [launches.decide(attempt=k).delay_s for k in range(1, 5)] == [1, 2, 4, 4]
    assert launches.decide(attempt=5).action is RetryAction.FAIL
    assert tasks.decide(attempt=2).action is RetryAction.FAIL  # the two budgets are apart
    with pytest.raises(ValueError, match="replica_name"):
        CoordinatorSettings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path}/x.db", replica_name="host:1")
