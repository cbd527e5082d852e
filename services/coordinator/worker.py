"""The worker harness: runs a task of a submission under a lease, ends the lease, and may go on.

This is what every backend starts (``nevis worker run-task --submission S --lease L``). It
is harness code: it holds the database and store settings and never imports the learner,
which runs only in sandboxed learner hosts (:mod:`workers.sandbox`). Steps:

1. start the lease (compare-and-set: a lease that was expired, cancelled or already started
   is left alone, so a duplicated launch never runs a task twice);
2. heartbeat the lease from a thread; if the lease is taken away (reaped or cancelled) the
   process exits at once, and its uncommitted work is discarded by the database;
3. unpack the learner's bundle, if it has one (its folder is the learner hosts' import path),
   and move the credentials out of the environment before Ray or any host starts;
4. :meth:`StreamRunner.run_next_task` runs the task and commits its result, FLOPs, learner
   state and the cursor in one transaction;
5. end the lease: success, or failure with the retry policy applied (and the worker exits);
6. after a success, take the submission's next task under a new lease in the same
   transaction, while nobody else waits for the slot and fewer than ``NEVIS_WORKER_MAX_TASKS``
   ran (:mod:`~services.coordinator.scheduler.continuation`): its actors and learner hosts
   stay warm, so the next task starts in a fraction of a second instead of a process's start.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.scheduler import lease_endings, lease_running, leases
from services.coordinator.scheduler.continuation import continue_after
from services.coordinator.scheduler.policy import retry_policy
from services.core.errors import BudgetError, BundleError, LearnerError, ManifestError, NevisError, UnknownNameError
from services.store.db import ensure_current, sessions_on, transaction
from services.store.db.models import Submission
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES
from services.store.objects import open_store
from workers.sandbox.bundles import UNPACK_FACTOR, unpack_stored_bundle

if TYPE_CHECKING:
    from workers.trainer.stream_runner import StreamRunner

log = logging.getLogger("nevis.worker")
LEASE_LOST_EXIT = 75
# Failures that would only repeat: a bad learner spec, a broken manifest, a bad budget.
NOT_RETRYABLE = (UnknownNameError, ManifestError, BudgetError, LearnerError, BundleError)


class Heartbeat(threading.Thread):
    """Refreshes a lease every ``interval`` seconds; calls ``on_lost`` if the lease is gone."""

    def __init__(
        self, sessions: sessionmaker[Session], *, lease_id: int, interval: float, on_lost: Callable[[], None]
    ) -> None:
        super().__init__(name=f"heartbeat-{lease_id}", daemon=True)
        self.sessions, self.lease_id, self.interval, self.on_lost = sessions, lease_id, interval, on_lost
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                with transaction(self.sessions) as session:
                    alive = lease_running.heartbeat(session, lease_id=self.lease_id)
            except Exception as exc:  # noqa: BLE001 - keep trying; the reaper decides
                log.warning("heartbeat of lease %s failed: %s", self.lease_id, exc)
                continue
            if not alive and not self._stop_event.is_set():
                self.on_lost()
                return

    def stop(self) -> None:
        self._stop_event.set()


def _lease_lost(lease_id: int) -> None:
    log.error("lease %s was taken away (reaped or cancelled); stopping this worker", lease_id)
    sys.stderr.flush()
    os._exit(LEASE_LOST_EXIT)  # uncommitted work is rolled back by the database


def run_task(settings: CoordinatorSettings, *, submission_id: int, lease_id: int) -> int:
    """Run the task of ``lease_id``, then (:mod:`~services.coordinator.scheduler.continuation`)
    the submission's next ones while it may; returns the process exit code (0: every lease
    ended well)."""
    ensure_current(settings.database_url)
    sessions = sessions_on(settings.database_url)
    with transaction(sessions) as session:
        outcome = lease_running.start_lease(
            session, lease_id=lease_id, submission_id=submission_id, task_deadline_s=settings.task_deadline_s
        )
    if not outcome.run:
        log.warning("not running lease %s: %s", lease_id, outcome.reason)
        return 0
    runner: StreamRunner | None = None  # started with the first task, reused by the next ones
    for count in range(1, settings.worker_max_tasks + 1):
        beat = Heartbeat(
            sessions,
            lease_id=lease_id,
            interval=settings.heartbeat_interval_s,
            on_lost=lambda lost=lease_id: _lease_lost(lost),
        )
        beat.start()
        try:
            runner = runner or _runner(settings, sessions, submission_id=submission_id)
            goes_on = runner.run_next_task(submission_id)
        except BaseException as exc:  # noqa: BLE001 - every failure must end the lease
            beat.stop()
            try:
                _fail(settings, sessions, lease_id=lease_id, exc=exc)
            finally:
                _shutdown_ray()
            return 1
        beat.stop()
        try:
            next_lease = _end_lease(
                settings, sessions, lease_id=lease_id, may_go_on=goes_on and count < settings.worker_max_tasks
            )
        except BaseException:
            _shutdown_ray()
            raise
        if next_lease is None:
            _shutdown_ray()  # after the lease ends: the next launch starts while these actors go (1.2 s)
            return 0
        log.info("lease %s succeeded; this worker goes on with lease %s", lease_id, next_lease)
        lease_id = next_lease
    return 0


def _end_lease(
    settings: CoordinatorSettings, sessions: sessionmaker[Session], *, lease_id: int, may_go_on: bool
) -> int | None:
    """End a lease whose task committed and, if ``may_go_on``, take the submission's next task
    in the same transaction; the new lease's id, or None when this worker should end."""
    with transaction(sessions) as session:
        ended = lease_running.finish_success(session, lease_id=lease_id)
        if ended is None or not may_go_on:
            return None
        taken = continue_after(session, ended=ended, task_deadline_s=settings.task_deadline_s)
        return None if taken is None else taken.id


def _runner(settings: CoordinatorSettings, sessions: sessionmaker[Session], *, submission_id: int) -> StreamRunner:
    """The submission's stream runner, once per worker: its bundle unpacked, the credentials
    moved out of the environment before anything that runs learner code starts."""
    from workers.trainer.ray_env import hold_secrets  # noqa: PLC0415 - heavy imports
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415 - heavy imports

    bundle_root = _prepare_bundle(settings, sessions, submission_id=submission_id)
    import_paths = None if bundle_root is None else [str(bundle_root)]
    if import_paths is None:
        import_paths = _prepare_image(settings, sessions, submission_id=submission_id)
    hold_secrets()  # nothing started from here on (Ray, learner hosts) inherits them
    registered = _uploaded_registration(sessions, submission_id)
    return StreamRunner(settings, import_paths=import_paths, submitted=registered is not None, registered=registered)


def _fail(settings: CoordinatorSettings, sessions: sessionmaker[Session], *, lease_id: int, exc: BaseException) -> None:
    reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, NevisError) else str(exc)
    retryable = not isinstance(exc, NOT_RETRYABLE)
    log.error("task of lease %s failed: %s\n%s", lease_id, reason, "".join(traceback.format_exception(exc)))
    with transaction(sessions) as session:  # a submission that ended meanwhile (a cap) stays so
        lease = leases.take_lease(session, lease_id=lease_id, expected=ACTIVE_LEASE_STATUSES)
        if lease is not None:
            lease_endings.settle_failure(
                session,
                lease=lease,
                status="failed",
                reason=reason[:4000],
                policy=retry_policy(settings),
                retryable=retryable,
            )


def _prepare_bundle(
    settings: CoordinatorSettings, sessions: sessionmaker[Session], *, submission_id: int
) -> Path | None:
    """Unpack the learner's bundle (if any) and return its import root.

    Harness code only unpacks and checks it; nothing here imports it. The root is the one
    folder of the learner's own that its sandboxed learner hosts get to see (read-only).
    """
    with sessions() as session:
        learner = session.get(Submission, submission_id).learner
        key, sha = learner.bundle_key, learner.bundle_sha256
    if not key:
        return None
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    return unpack_stored_bundle(
        store,
        key=key,
        sha256=sha,
        root=settings.data_dir / "bundles",
        max_unpacked_bytes=UNPACK_FACTOR * settings.bundle_max_bytes,
    )


def _prepare_image(
    settings: CoordinatorSettings, sessions: sessionmaker[Session], *, submission_id: int
) -> list[str] | None:
    """The import paths of the learner's image (if any), unpacked on this node by the digest
    its registration pinned: files its sandboxed hosts import, never a process of its own."""
    from services.coordinator.learner_images import image_import_paths  # noqa: PLC0415 - image learners only

    with sessions() as session:
        ref = session.get(Submission, submission_id).learner.image_ref
    return None if not ref else image_import_paths(ref, settings=settings)


def _uploaded_registration(sessions: sessionmaker[Session], submission_id: int) -> dict[str, Any] | None:
    """The registered resources of a learner that came from a submitter (a bundle or an
    image), or ``None`` for one of the installation's own."""
    with sessions() as session:
        learner = session.get(Submission, submission_id).learner
        if not (learner.bundle_key or learner.image_ref):
            return None
        return {"cpus": 1.0, "gpus": 0, **dict(learner.resources or {})}


def _shutdown_ray() -> None:
    if "ray" in sys.modules:
        import ray  # noqa: PLC0415 - only when this process started it

        if ray.is_initialized():
            ray.shutdown()


__all__ = ["LEASE_LOST_EXIT", "NOT_RETRYABLE", "Heartbeat", "run_task"]
