"""The scheduler: one pass (:meth:`Scheduler.tick`) stops cancelled jobs, reaps dead leases,
settles and starts benchmark refreshes (:mod:`services.coordinator.refresh.timer`) and
launches ready tasks; :meth:`Scheduler.start` repeats it on a thread.

Any number of schedulers (coordinator replicas) may run against one PostgreSQL database:
claims use ``SKIP LOCKED`` and every lease change is a compare-and-set, so no task is
launched twice and no lease is ended twice. A restarted scheduler needs no state of its
own: leases in flight keep their heartbeats (their workers write them) or are reaped.

Faults:

- A launch the backend refuses (``launch()`` raising: an outage, a bad worker command)
  ends the lease ``launch_failed`` and backs off; it spends none of the task's attempts
  (``NEVIS_MAX_ATTEMPTS``), only the launch budget (``NEVIS_MAX_LAUNCH_FAILURES``
  consecutive refusals), after which the submission fails naming the backend and the last
  error. A pass stops launching at the first refusal (the backend is likely down).
- Slots are counted in the database under the replica's stable name
  (``NEVIS_REPLICA_NAME``, default the host name; owners are ``<replica>:<pid>:<nonce>``),
  so a restarted coordinator counts the leases its previous process left in flight;
  ``NEVIS_CLUSTER_SLOTS`` optionally caps the leases in flight of all replicas together.
- The ``local`` backend knows only this host's processes: a replica refuses to start (and
  to launch) while another replica has local leases in flight, and never judges or stops
  another replica's local job by its pid.
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
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.refresh.timer import RefreshTimer
from services.coordinator.scheduler import lease_endings, leases, slots
from services.coordinator.scheduler.policy import (
    ExpiryKind,
    LeasePolicy,
    LeaseView,
    Verdict,
    launch_retry_policy,
    retry_policy,
)
from services.coordinator.telemetry import Metrics
from services.core.errors import ConfigError
from services.store.db import transaction
from services.store.db.models import Submission
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, TaskLease
from services.store.db.types import utcnow

log = logging.getLogger("nevis.scheduler")
LAUNCHES_PER_PASS = 32
"""Launches in one pass at most: cancellations and the reaper run between batches, so a
backlog of ready tasks never delays expiring a dead lease by more than one batch."""


@dataclass
class TickReport:
    """What one pass did (lease ids)."""

    launched: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    refreshes: list[int] = field(default_factory=list)  # refreshes this pass started
    cut_short: bool = False  # hit LAUNCHES_PER_PASS with tasks still ready: pass again at once


def _host() -> str:
    return socket.gethostname()[:60].replace(":", "-") or "localhost"


def replica_name(settings: CoordinatorSettings) -> str:
    """This replica's stable name: ``NEVIS_REPLICA_NAME``, else the host name."""
    return settings.replica_name or _host()


def instance_id(replica: str | None = None) -> str:
    """A name for this scheduler instance, unique across hosts and restarts:
    ``<replica>:<pid>:<nonce>`` (the replica defaults to the host name)."""
    return f"{replica or _host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owned_by(owner: str, replica: str) -> bool:
    """Whether a lease's ``owner`` is an instance of ``replica`` (see :func:`instance_id`)."""
    return owner == replica or owner.startswith(f"{replica}:")


class Scheduler:
    """Launches the task at each submission's cursor, one at a time per submission."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        backend: Backend,
        sessions: sessionmaker[Session],
        metrics: Metrics | None = None,
        owner: str | None = None,
        replica: str | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.sessions = sessions
        self.metrics = metrics or Metrics()
        # The slots are the replica's: every instance of it (restarts) shares them.
        self.replica = replica or (owner.split(":", 1)[0] if owner else replica_name(settings))
        self.owner = owner or instance_id(self.replica)
        if not owned_by(self.owner, self.replica):
            raise ValueError(
                f"The owner {self.owner!r} is not an instance of the replica "
                f"{self.replica!r} (expected '{self.replica}:...')."
            )
        self.lease_policy = LeasePolicy(settings.heartbeat_timeout_s)
        self.retry_policy = retry_policy(settings)
        self.launch_policy = launch_retry_policy(settings)
        self.refresh_timer = RefreshTimer(settings, sessions)
        self.last_tick_at: datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- one pass -------------------------------------------------------------------------

    def tick(self) -> TickReport:
        report = TickReport()
        self._stop_cancelled(report)
        self._reap(report)
        self.backend.reap()  # local: wait on ended worker processes
        self._refresh(report)
        self._launch(report)
        self.last_tick_at = utcnow()
        self.metrics.ticks.inc()
        return report

    def _refresh(self, report: TickReport) -> None:
        """Settle refreshes and start due ones (NEVIS_REFRESH_CRON); a failure is logged,
        never a failed pass: launching must not wait on a broken stream manifest."""
        try:
            done = self.refresh_timer.tick()
        except Exception:
            log.exception("refresh check failed")
            return
        if done is not None:
            report.refreshes.extend(o.refresh.id for o in done.started)

    def _ours_to_ask(self, backend: str, owner: str) -> bool:
        """Whether this backend may look up (or stop) the job of a lease: one of its kind,
        and for ``local`` one this replica launched (another host's pid means nothing here)."""
        if backend != self.backend.name:
            return False
        return backend != "local" or owned_by(owner, self.replica)

    def check_local_hosts(self) -> None:
        """Refuse the ``local`` backend while another replica has local leases in flight.

        Raises:
            ConfigError: naming the other replicas' leases and what to do.
        """
        if self.backend.name != "local":
            return
        with self.sessions() as session:
            foreign = [
                (lease.id, lease.owner)
                for lease in slots.foreign_leases(session, backend="local", replica=self.replica)
            ]
        if foreign:
            shown = ", ".join(f"lease {i} of {owner!r}" for i, owner in foreign[:5])
            more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            raise ConfigError(
                f"The local backend runs workers as processes of its own host, but another "
                f"coordinator replica has local tasks in flight ({shown}{more}); this replica "
                f"is {self.replica!r}. Run a single coordinator replica with NEVIS_BACKEND=local "
                "(a restarted one keeps its NEVIS_REPLICA_NAME, default the host name), or use "
                "the ray or kuberay backend for several replicas."
            )

    def _stop_cancelled(self, report: TickReport) -> None:
        with self.sessions() as session:
            doomed = [
                (lease.id, lease.job_id, lease.backend, lease.owner) for lease in slots.cancelled_in_flight(session)
            ]
        for lease_id, job_id, backend, owner in doomed:
            if job_id and self._ours_to_ask(backend, owner):
                self.backend.cancel(job_id)
            with transaction(self.sessions) as session:
                if lease_endings.cancel_lease(session, lease_id=lease_id) is not None:
                    report.cancelled.append(lease_id)
        with transaction(self.sessions) as session:
            lease_endings.restore_cancelled(session)

    def _reap(self, report: TickReport) -> None:
        with self.sessions() as session:
            seen = [
                (
                    lease.id,
                    lease.status,
                    lease.job_id,
                    lease.backend,
                    lease.owner,
                    LeaseView(lease.status, lease.heartbeat_at, lease.deadline_at),
                )
                for lease in slots.active_leases(session)
            ]
        for lease_id, status, job_id, backend, owner, view in seen:
            ended = None
            asked = bool(job_id) and self._ours_to_ask(backend, owner)
            if asked:
                job = self.backend.status(job_id)
                if job.state.ended:
                    ended = f"the {backend} job {job_id} ended ({job.state.value}: {job.message}) without the worker reporting"
            if ended is None and self.lease_policy.judge(view, utcnow()).verdict is not Verdict.EXPIRE:
                # Alive as read: heartbeats only move forward and a start sets a fresh
                # deadline, so it is alive under the lock too. No transaction per live lease.
                continue
            if self._expire(lease_id, status, ended):
                report.expired.append(lease_id)
                if asked:
                    self.backend.cancel(job_id)  # a job past its deadline may still run

    def _expire(self, lease_id: int, status: str, ended: str | None) -> bool:
        """Expire a lease if, read again under its row lock, it is still dead."""
        with transaction(self.sessions) as session:
            lease = leases.take_lease(session, lease_id=lease_id, expected=(status,))
            if lease is None:
                return False
            judgement = self.lease_policy.judge(
                LeaseView(lease.status, lease.heartbeat_at, lease.deadline_at), utcnow()
            )
            if judgement.verdict is Verdict.EXPIRE:
                kind, reason = judgement.kind, judgement.reason
            elif ended is not None:
                kind, reason = ExpiryKind.JOB_ENDED, ended
            else:
                return False
            lease_endings.settle_failure(
                session,
                lease=lease,
                status="expired",
                reason=reason,
                policy=self.retry_policy,
                run_status="timed_out" if kind is ExpiryKind.DEADLINE else "failed",
            )
        log.warning("expired lease %s (%s): %s", lease_id, kind.value, reason)
        self.metrics.expired.labels(kind=kind.value).inc()
        return True

    def _slots_full(self, session: Session) -> bool:
        if slots.count_replica(session, replica=self.replica) >= self.settings.scheduler_slots:
            return True
        cap = self.settings.cluster_slots
        if cap is None:
            return False
        slots.lock_claims(session)  # held until the claim commits: no two replicas fill one slot
        return slots.count_active(session) >= cap

    def _launch(self, report: TickReport) -> None:
        self.check_local_hosts()
        # Launches made and not yet recorded: each is recorded (mark_launched) in the
        # transaction of the next claim, and whatever is left when the pass ends in one of its
        # own, so a launch costs one commit instead of two. A worker may start its lease first
        # either way (mark_launched keeps ``running``), and the start deadline is unchanged.
        unrecorded: list[tuple[int, str]] = []
        try:
            while not self._stop.is_set():
                if len(report.launched) >= LAUNCHES_PER_PASS:
                    report.cut_short = True  # reap and cancel between batches, even under a backlog
                    return
                spec = None
                try:
                    with transaction(self.sessions) as session:
                        _record_launches(session, unrecorded)
                        if not self._slots_full(session):
                            lease = leases.claim_next(
                                session,
                                owner=self.owner,
                                backend=self.backend.name,
                                start_timeout_s=self.settings.start_timeout_s,
                            )
                            if lease is not None:
                                spec = _launch_spec(session, lease)
                except (IntegrityError, DBAPIError) as exc:  # lost a race (SQLite), or a blip
                    log.info("claim lost or failed, retrying next pass: %s", exc.orig)
                    return
                unrecorded = []
                if spec is None:
                    return
                try:
                    job_id = self.backend.launch(spec)
                except Exception as exc:  # noqa: BLE001 - a refused launch backs off, no attempt spent
                    log.error("the %s backend could not launch lease %s: %s", self.backend.name, spec.lease_id, exc)
                    self.metrics.launch_failures.labels(backend=self.backend.name).inc()
                    with transaction(self.sessions) as session:
                        lease = leases.take_lease(session, lease_id=spec.lease_id, expected=ACTIVE_LEASE_STATUSES)
                        if lease is not None:
                            lease_endings.settle_launch_failure(
                                session, lease=lease, error=str(exc) or type(exc).__name__, policy=self.launch_policy
                            )
                    return  # the backend is likely down: try again next pass
                unrecorded.append((spec.lease_id, job_id))
                self.metrics.launches.labels(backend=self.backend.name).inc()
                report.launched.append(spec.lease_id)
        finally:
            if unrecorded:
                with transaction(self.sessions) as session:
                    _record_launches(session, unrecorded)

    # --- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        """Run passes every ``NEVIS_POLL_INTERVAL_S`` on a daemon thread until :meth:`stop`.

        Raises:
            ConfigError: the backend is ``local`` and another replica has local tasks in
                flight (see :meth:`check_local_hosts`).
        """
        if self._thread is not None:
            return
        self.check_local_hosts()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"scheduler-{self.owner}", daemon=True)
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
                report = self.tick()
            except Exception:
                log.exception("scheduler pass failed")
                self.metrics.tick_errors.inc()
                report = TickReport()
            self._stop.wait(0 if report.cut_short else self.settings.poll_interval_s)


def _record_launches(session: Session, launched: list[tuple[int, str]]) -> None:
    """Record the backend's job id of each (lease id, job id) launched."""
    for lease_id, job_id in launched:
        leases.mark_launched(session, lease_id=lease_id, job_id=job_id)


def _launch_spec(session: Session, lease: TaskLease) -> LaunchSpec:
    learner = session.get(Submission, lease.submission_id).learner
    resources = ResourceRequest.stored(learner.resources)
    return LaunchSpec(
        lease_id=lease.id,
        submission_id=lease.submission_id,
        task_order=lease.task_order,
        attempt=lease.attempt,
        learner_name=learner.name,
        entrypoint=learner.entrypoint,
        image=learner.image_ref,
        resources=resources,
    )


__all__ = ["LAUNCHES_PER_PASS", "Scheduler", "TickReport", "instance_id", "owned_by", "replica_name"]
