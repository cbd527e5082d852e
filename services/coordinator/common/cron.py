"""Cron expressions of the coordinator's schedules (``NEVIS_REFRESH_CRON``), parsed with croniter.

The settings check an expression when they load, so a typo stops the coordinator at start
with a message naming the variable instead of silently never refreshing. Expressions have
the five fields a Kubernetes CronJob takes (minute hour day-of-month month day-of-week), or
one of the ``@hourly``-style nicknames, and are read in UTC.

A schedule is *due* when a fire time has passed since the caller last acted on it
(:meth:`CronSchedule.due`); the caller keeps that instant, so a process that starts late, or
was down at a fire time, acts once on its first look and then at each later fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from croniter import croniter

NICKNAMES: tuple[str, ...] = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
FIELDS = 5


def check_cron(expression: str) -> str:
    """``expression`` stripped, if it is a valid five-field cron expression or nickname.

    Raises:
        ValueError: saying what a valid expression looks like.
    """
    value = expression.strip()
    shape = (
        "a cron expression of 5 fields (minute hour day-of-month month day-of-week, UTC), "
        "e.g. '0 3 * * *', or one of " + ", ".join(NICKNAMES)
    )
    if value.startswith("@"):
        if value not in NICKNAMES:
            raise ValueError(f"must be {shape}. Got {expression!r} instead.")
        return value
    if len(value.split()) != FIELDS or not croniter.is_valid(value):
        raise ValueError(f"must be {shape}. Got {expression!r} instead.")
    return value


@dataclass(frozen=True)
class CronSchedule:
    """A checked cron expression and the questions a scheduler asks of it."""

    expression: str

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        """Raises ValueError for an invalid expression (see :func:`check_cron`)."""
        return cls(check_cron(expression))

    def last_fire(self, now: datetime) -> datetime:
        """The latest fire time at or before ``now`` (aware UTC)."""
        now = now.astimezone(UTC)
        if croniter.match(self.expression, now.replace(second=0, microsecond=0)) and (
            now.second == 0 and now.microsecond == 0
        ):
            return now
        return croniter(self.expression, now).get_prev(datetime).astimezone(UTC)

    def next_fire(self, now: datetime) -> datetime:
        """The first fire time after ``now`` (aware UTC)."""
        return croniter(self.expression, now.astimezone(UTC)).get_next(datetime).astimezone(UTC)

    def due(self, now: datetime, last_run: datetime | None) -> bool:
        """Whether a fire time has come since ``last_run`` (None: never ran, so due now)."""
        return last_run is None or self.last_fire(now) > last_run


__all__ = ["FIELDS", "NICKNAMES", "CronSchedule", "check_cron"]
