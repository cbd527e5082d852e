"""Prometheus metrics of one coordinator process, on a registry of its own.

Counters are bumped by the HTTP middleware and the scheduler; gauges of the queue are read
from the database at scrape time (so every replica reports the same, true numbers).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from services.store.db.models import SUBMISSION_STATUSES, Submission
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, TaskLease

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """The process's metric objects."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "nevis_http_requests", "HTTP requests served.", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "nevis_http_request_duration_seconds", "Time to serve an HTTP request.", ["method", "route"], registry=r
        )
        self.submissions_created = Counter("nevis_submissions_created", "Submissions accepted.", registry=r)
        self.launches = Counter("nevis_scheduler_launches", "Tasks launched.", ["backend"], registry=r)
        self.launch_failures = Counter(
            "nevis_scheduler_launch_failures", "Launches the backend refused.", ["backend"], registry=r
        )
        self.expired = Counter("nevis_scheduler_leases_expired", "Leases the reaper expired.", ["kind"], registry=r)
        self.ticks = Counter("nevis_scheduler_ticks", "Scheduler passes.", registry=r)
        self.tick_errors = Counter("nevis_scheduler_tick_errors", "Scheduler passes that raised.", registry=r)

    def watch_database(self, sessions: sessionmaker[Session]) -> None:
        """Report queue gauges read from the database at each scrape."""
        self.registry.register(_QueueCollector(sessions))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _QueueCollector(Collector):
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_status = GaugeMetricFamily("nevis_submissions", "Submissions by status.", labels=["status"])
        leases = GaugeMetricFamily("nevis_task_leases_active", "Tasks in flight.")
        try:
            with self.sessions() as session:
                counts = dict(
                    session.execute(select(Submission.status, func.count()).group_by(Submission.status)).all()
                )
                active = (
                    session.scalar(
                        select(func.count()).select_from(TaskLease).where(TaskLease.status.in_(ACTIVE_LEASE_STATUSES))
                    )
                    or 0
                )
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database did
            return
        for status in SUBMISSION_STATUSES:
            by_status.add_metric([status], counts.get(status, 0))
        leases.add_metric([], active)
        yield by_status
        yield leases


__all__ = ["CONTENT_TYPE", "Metrics"]
