"""The scheduler: one pass (:meth:`Scheduler.tick`) stops cancelled jobs, reaps dead leases
and launches ready tasks; :meth:`Scheduler.start` repeats it on a thread.

Any number of schedulers (coordinator replicas) may run against one PostgreSQL database:
claims use ``SKIP LOCKED`` and every lease change is a compare-and-set, so no task is
launched twice and no lease is ended twice. A restarted scheduler needs no state of its
own: leases in flight keep their heartbeats (their workers write them) or are reaped.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.backends.base import Backend, LaunchSpec
from services.coordinator.core.config import CoordinatorSettings
from services.coordinator.core.validation import ResourceRequest
from services.coordinator.metrics import Metrics
from services.coordinator.scheduler import leases
from services.coordinator.scheduler.policy import (
    ExpiryKind,
    LeasePolicy,
    LeaseView,
    Verdict,
    retry_policy,
)
from services.store.db import transaction
from services.store.db.models import Submission
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, TaskLease
from services.store.db.types import utcnow

log = logging.getLogger("nevis.scheduler")


@dataclass
class TickReport:
    """What one pass did (lease ids)."""

    launched: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)


def instance_id() -> str:
    """A name for this scheduler instance, unique across hosts and restarts."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler:
    """Launches the task at each submission's cursor, one at a time per submission."""

    def __init__(self, settings: CoordinatorSettings, *, backend: Backend,
                 sessions: sessionmaker[Session], metrics: Metrics | None = None,
                 owner: str | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self.sessions = sessions
        self.metrics = metrics or Metrics()
        self.owner = owner or instance_id()
        self.lease_policy = LeasePolicy(settings.heartbeat_timeout_s)
        self.retry_policy = retry_policy(settings)
        self.last_tick_at: datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- one pass -------------------------------------------------------------------------

    def tick(self) -> TickReport:
        report = TickReport()
        self._stop_cancelled(report)
        self._reap(report)
        self.backend.reap()  # local: wait on ended worker processes
        self._launch(report)
        self.last_tick_at = utcnow()
        self.metrics.ticks.inc()
        return report

    def _stop_cancelled(self, report: TickReport) -> None:
        with self.sessions() as session:
            doomed = [(lease.id, lease.job_id, lease.backend)
                      for lease in leases.cancelled_in_flight(session)]
        for lease_id, job_id, backend in doomed:
            if job_id and backend == self.backend.name:
                self.backend.cancel(job_id)
            with transaction(self.sessions) as session:
                if leases.cancel_lease(session, lease_id=lease_id) is not None:
                    report.cancelled.append(lease_id)
        with transaction(self.sessions) as session:
            leases.restore_cancelled(session)

    def _reap(self, report: TickReport) -> None:
        with self.sessions() as session:
            seen = [(lease.id, lease.status, lease.job_id, lease.backend)
                    for lease in leases.active_leases(session)]
        for lease_id, status, job_id, backend in seen:
            ended = None
            if job_id and backend == self.backend.name:
                job = self.backend.status(job_id)
                if job.state.ended:
                    ended = f"the {backend} job {job_id} ended ({job.state.value}: {job.message}) without the worker reporting"
            if self._expire(lease_id, status, ended):
                report.expired.append(lease_id)
                if job_id and backend == self.backend.name:
                    self.backend.cancel(job_id)  # a job past its deadline may still run

    def _expire(self, lease_id: int, status: str, ended: str | None) -> bool:
        """Expire a lease if, read again under its row lock, it is still dead."""
        with transaction(self.sessions) as session:
            lease = leases.take_lease(session, lease_id=lease_id, expected=(status,))
            if lease is None:
                return False
            judgement = self.lease_policy.judge(
                LeaseView(lease.status, lease.heartbeat_at, lease.deadline_at), utcnow())
            if judgement.verdict is Verdict.EXPIRE:
                kind, reason = judgement.kind, judgement.reason
            elif ended is not None:
                kind, reason = ExpiryKind.JOB_ENDED, ended
            else:
                return False
            leases.settle_failure(
                session, lease=lease, status="expired", reason=reason, policy=self.retry_policy,
                run_status="timed_out" if kind is ExpiryKind.DEADLINE else "failed")
        log.warning("expired lease %s (%s): %s", lease_id, kind.value, reason)
        self.metrics.expired.labels(kind=kind.value).inc()
        return True

    def _launch(self, report: TickReport) -> None:
        while not self._stop.is_set():
            try:
                with transaction(self.sessions) as session:
                    if leases.count_owned(session, owner=self.owner) >= self.settings.scheduler_slots:
                        return
                    lease = leases.claim_next(session, owner=self.owner, backend=self.backend.name,
                                              start_timeout_s=self.settings.start_timeout_s)
                    if lease is None:
                        return
                    spec = _launch_spec(session, lease)
            except (IntegrityError, DBAPIError) as exc:  # lost a race (SQLite), or a blip
                log.info("claim lost or failed, retrying next pass: %s", exc.orig)
                return
            try:
                job_id = self.backend.launch(spec)
            except Exception as exc:  # noqa: BLE001 - a refused launch fails the lease
                log.error("the %s backend could not launch lease %s: %s", self.backend.name,
                          spec.lease_id, exc)
                self.metrics.launch_failures.labels(backend=self.backend.name).inc()
                with transaction(self.sessions) as session:
                    lease = leases.take_lease(session, lease_id=spec.lease_id,
                                              expected=ACTIVE_LEASE_STATUSES)
                    if lease is not None:
                        leases.settle_failure(
                            session, lease=lease, status="failed", policy=self.retry_policy,
                            reason=f"the {self.backend.name} backend could not launch the task: {exc}")
                continue
            with transaction(self.sessions) as session:
                leases.mark_launched(session, lease_id=spec.lease_id, job_id=job_id)
            self.metrics.launches.labels(backend=self.backend.name).inc()
            report.launched.append(spec.lease_id)

    # --- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        """Run passes every ``NEVIS_POLL_INTERVAL_S`` on a daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"scheduler-{self.owner}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad pass must not stop scheduling
                log.exception("scheduler pass failed")
                self.metrics.tick_errors.inc()
            self._stop.wait(self.settings.poll_interval_s)


def _launch_spec(session: Session, lease: TaskLease) -> LaunchSpec:
    learner = session.get(Submission, lease.submission_id).learner
    res = learner.resources or {}
    resources = ResourceRequest(cpus=float(res.get("cpus", res.get("cpus_per_worker", 1.0))),
                                gpus=int(res.get("gpus", res.get("gpus_per_worker", 0))),
                                memory_mb=int(res.get("memory_mb", 2048)))
    return LaunchSpec(lease_id=lease.id, submission_id=lease.submission_id,
                      task_order=lease.task_order, attempt=lease.attempt,
                      learner_name=learner.name, entrypoint=learner.entrypoint,
                      image=learner.image_ref, resources=resources)


__all__ = ["Scheduler", "TickReport", "instance_id"]
