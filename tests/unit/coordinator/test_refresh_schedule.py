"""The refresh settings: NEVIS_REFRESH_CRON parsed (croniter) at settings load with a clear
error, its due rule, and the baselines and budget checked the same way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from services.coordinator.common.config import CoordinatorSettings, get_coordinator_settings
from services.coordinator.common.config_refresh import refresh_budget_of
from services.coordinator.common.cron import CronSchedule, check_cron
from services.coordinator.common.validation import split_list
from services.core.budget import RunBudget
from services.core.errors import ConfigError

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)


def _settings(**values) -> CoordinatorSettings:
    return CoordinatorSettings(database_url="sqlite://", **values)


def test_the_cron_is_off_by_default_and_parsed_when_set():
    assert _settings().refresh_schedule is None
    assert _settings(refresh_cron=" 0 3 * * 1 ").refresh_schedule == CronSchedule("0 3 * * 1")
    assert _settings(refresh_cron="@daily").refresh_schedule.expression == "@daily"


@pytest.mark.parametrize(
    "expression", ["every day", "* * * *", "61 * * * *", "* * * * * *", "0 25 * * *", "@fortnightly"]
)
def test_a_bad_cron_stops_the_settings_naming_the_variable(settings_env, monkeypatch, expression):
    with pytest.raises(ValidationError, match="5 fields"):
        _settings(refresh_cron=expression)
    monkeypatch.setenv("NEVIS_REFRESH_CRON", expression)
    get_coordinator_settings.cache_clear()
    try:
        with pytest.raises(ConfigError) as caught:
            get_coordinator_settings()
    finally:
        get_coordinator_settings.cache_clear()
    assert "NEVIS_REFRESH_CRON" in str(caught.value) and "e.g. '0 3 * * *'" in str(caught.value)


def test_a_schedule_is_due_once_per_fire_time():
    schedule = CronSchedule.parse("0 3 * * *")
    assert schedule.due(T0, None)  # never looked: due (catches up a missed fire)
    looked = T0
    assert not schedule.due(T0 + timedelta(minutes=59), looked)  # 03:00 has not come
    fire = T0 + timedelta(hours=1)
    assert schedule.last_fire(fire) == fire and schedule.due(fire, looked)
    looked = fire + timedelta(seconds=2)
    assert not schedule.due(fire + timedelta(hours=12), looked)
    assert schedule.due(fire + timedelta(days=1), looked)
    assert schedule.next_fire(looked) == fire + timedelta(days=1)


def test_check_cron_keeps_nicknames_and_refuses_others():
    assert check_cron("@hourly") == "@hourly"
    with pytest.raises(ValueError, match="@hourly"):
        check_cron("@sometimes")


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"refresh_baselines": "indep,my.module:make"}, "built-in learner names"),
        ({"refresh_baselines": "Indep"}, "built-in learner names"),
        ({"refresh_budget": "{trials: 2}"}, "JSON object"),
        ({"refresh_budget": "[1]"}, "JSON object"),
        ({"refresh_budget": '{"trails": 2}'}, "trails"),
        ({"refresh_budget": '{"trials": 100}', "max_trials": 10}, "NEVIS_MAX_TRIALS"),
        ({"refresh_owner": "no spaces"}, "refresh_owner"),
    ],
)
def test_bad_refresh_settings_are_refused(values, words):
    with pytest.raises(ValidationError, match=words):
        _settings(**values)


def test_good_refresh_settings_load():
    settings = _settings(
        refresh_baselines=" indep , ft_prev ,", refresh_budget='{"trials": 2}', refresh_streams="mini, nevis22-short"
    )
    assert split_list(settings.refresh_baselines) == ["indep", "ft_prev"]
    assert refresh_budget_of(settings.refresh_budget) == RunBudget(trials=2)
    assert refresh_budget_of("") == RunBudget()
    assert split_list(settings.refresh_streams) == ["mini", "nevis22-short"]
