"""The simulated backend of bench/scale_sim.py and its workers, run inside each replica
process: a worker does against the database what ``nevis worker run-task`` does, without
training anything (see bench/scale_sim.py's docstring)."""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import os
import random
import signal
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec
from services.coordinator.common.config import CoordinatorSettings, get_coordinator_settings
from services.coordinator.scheduler import lease_endings, lease_running, leases
from services.coordinator.scheduler.loop import Scheduler
from services.coordinator.scheduler.policy import retry_policy
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import StreamVersion, Submission, TaskRun, Trial
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from workers.stream.manifest import eval_split
from workers.stream.versions import stored_manifest

TERMINAL = ("succeeded", "failed", "cancelled")
MAX_ENDED_JOBS = 50_000  # ended jobs whose state status() still reports, per replica
MAX_ERRORS_KEPT = 20
log = logging.getLogger("nevis.scale_sim")


# --- the simulated backend and its workers (run inside each replica process) ---------------


@dataclass(frozen=True)
class Timings:
    """Random delays of a simulated worker, in milliseconds (uniform in [low, high])."""

    start_ms: tuple[float, float] = (2.0, 20.0)  # from launch() to the worker's first step
    run_ms: tuple[float, float] = (10.0, 100.0)  # the task's "training"


@dataclass
class _Job:
    job_id: str
    spec: LaunchSpec
    steps: Iterator[float]
    state: JobState = JobState.PENDING
    message: str = ""
    cancelled: bool = False


class WorkerPool:
    """Simulated workers: a few threads that step every launched job through the harness.

    A job is a generator of the harness steps (:meth:`_harness`) that yields the seconds to
    wait before its next step, so any number of jobs in flight share ``threads`` threads.
    """

    def __init__(
        self,
        settings: CoordinatorSettings,
        sessions: sessionmaker[Session],
        *,
        threads: int,
        timings: Timings,
        crash_rate: float,
        seed: int,
    ) -> None:
        self.settings, self.sessions = settings, sessions
        self.timings, self.crash_rate = timings, crash_rate
        self.rng = random.Random(seed)
        self.policy = retry_policy(settings)
        self._threads = [
            threading.Thread(target=self._work, name=f"sim-worker-{i}", daemon=True) for i in range(threads)
        ]
        self._due: list[tuple[float, int, _Job]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stop = False
        self._jobs: dict[str, _Job] = {}
        self._ended: OrderedDict[str, JobStatus] = OrderedDict()
        self._plans: dict[tuple[int, str], tuple[dict[int, str], dict[int, int | None]]] = {}
        # what the replica reports at the end
        self.launches: list[tuple[int, int, int]] = []  # (lease, submission, order)
        self.outcomes: dict[int, str] = {}  # lease -> committed | refused | crashed | ...
        self.errors: list[str] = []
        self.error_count = 0

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # --- the backend's side --------------------------------------------------------------

    def submit(self, spec: LaunchSpec, job_id: str) -> None:
        job = _Job(job_id, spec, iter(()))
        job.steps = self._harness(job)
        with self._cond:
            self.launches.append((spec.lease_id, spec.submission_id, spec.task_order))
            self._jobs[job_id] = job
            self._push(job, self._uniform(self.timings.start_ms))

    def status(self, job_id: str) -> JobStatus:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is not None:
                return JobStatus(job.state)
            return self._ended.get(job_id, JobStatus(JobState.UNKNOWN))

    def cancel(self, job_id: str) -> None:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is not None:
                job.cancelled = True

    # --- the threads ---------------------------------------------------------------------

    def _uniform(self, bounds: tuple[float, float]) -> float:
        return self.rng.uniform(*bounds) / 1000.0

    def _push(self, job: _Job, delay_s: float) -> None:
        heapq.heappush(self._due, (time.monotonic() + delay_s, next(self._seq), job))
        self._cond.notify()

    def _next_due(self) -> _Job | None:
        with self._cond:
            while not self._stop:
                if self._due:
                    wait = self._due[0][0] - time.monotonic()
                    if wait <= 0:
                        return heapq.heappop(self._due)[2]
                    self._cond.wait(wait)
                else:
                    self._cond.wait()
            return None

    def _work(self) -> None:
        while (job := self._next_due()) is not None:
            if job.cancelled:
                self._end(job, "cancelled", JobState.FAILED, "cancelled by the scheduler")
                continue
            try:
                delay = next(job.steps)
            except StopIteration:
                continue
            except Exception as exc:  # noqa: BLE001 - a failed step fails the task, as in run_task
                self._fail(job, exc)
                continue
            with self._cond:
                self._push(job, delay)

    def _end(self, job: _Job, outcome: str, state: JobState, message: str = "") -> None:
        with self._cond:
            self.outcomes[job.spec.lease_id] = outcome
            self._jobs.pop(job.job_id, None)
            self._ended[job.job_id] = JobStatus(state, message)
            while len(self._ended) > MAX_ENDED_JOBS:
                self._ended.popitem(last=False)

    def _fail(self, job: _Job, exc: BaseException) -> None:
        """What ``services.coordinator.worker`` does when a task raises: settle the lease."""
        reason = f"{type(exc).__name__}: {exc}"
        with self._cond:
            self.error_count += 1
            if len(self.errors) < MAX_ERRORS_KEPT:
                self.errors.append(f"lease {job.spec.lease_id}: {reason}"[:500])
        try:
            with transaction(self.sessions) as session:
                lease = leases.take_lease(session, lease_id=job.spec.lease_id, expected=ACTIVE_LEASE_STATUSES)
                if lease is not None:
                    lease_endings.settle_failure(
                        session, lease=lease, status="failed", reason=reason[:4000], policy=self.policy
                    )
        finally:
            self._end(job, "error", JobState.FAILED, reason)

    def _plan(
        self, session: Session, stream_version_id: int, phase: str
    ) -> tuple[dict[int, str], dict[int, int | None]]:
        """The phase's tasks of a stored stream version: order -> kind, order -> next order.
        A real worker reads the stored manifest once per task; workers are other machines, so
        the simulation reads it once per replica to keep its CPU for the coordinator."""
        key = (stream_version_id, phase)
        if key not in self._plans:
            tasks = stored_manifest(session.get(StreamVersion, stream_version_id)).tasks_of_phase(phase)
            orders = [t.order for t in tasks]
            self._plans[key] = ({t.order: t.kind for t in tasks}, dict(zip(orders, [*orders[1:], None], strict=True)))
        return self._plans[key]

    def _harness(self, job: _Job) -> Iterator[float]:
        """The database steps of ``nevis worker run-task`` for one lease, with made-up
        results; yields the seconds to wait before the next step."""
        spec, rng = job.spec, self.rng
        with transaction(self.sessions) as session:
            started = lease_running.start_lease(
                session,
                lease_id=spec.lease_id,
                submission_id=spec.submission_id,
                task_deadline_s=self.settings.task_deadline_s,
            )
        if not started.run:  # a wasted launch: say why
            with self._cond:
                if len(self.errors) < MAX_ERRORS_KEPT:
                    self.errors.append(f"lease {spec.lease_id} not started: {started.reason}")
            self._end(job, "refused", JobState.SUCCEEDED, started.reason)
            return
        job.state = JobState.RUNNING
        # StreamRunner.run_next_task: the plan, the submission marked running, the caps
        with self.sessions() as session:
            submission = session.get(Submission, spec.submission_id)
            kinds, after = self._plan(session, submission.stream_version_id, submission.phase)
            order, phase, status = submission.cursor, submission.phase, submission.status
            version_id = submission.stream_version_id
        if status == "succeeded" or order not in kinds:
            raise RuntimeError(f"submission {spec.submission_id} has no task at cursor {order}")
        with transaction(self.sessions) as session:
            submission = session.get(Submission, spec.submission_id)
            submission.status, submission.error, submission.finished_at = "running", None, None
        with self.sessions() as session:
            records.committed_totals(session, submission_id=spec.submission_id)
        # StreamRunner._open_attempt
        with transaction(self.sessions) as session:
            task = records.stream_task(session, stream_version_id=version_id, order=order)
            run = records.start_task_run(session, submission=session.get(Submission, spec.submission_id), task=task)
            run_id, attempt = run.id, run.attempt
        if rng.random() < self.crash_rate:
            self._end(job, "crashed", JobState.FAILED, "the simulated worker died")
            return  # no heartbeat, no commit: the reaper must act
        run_s = self._uniform(self.timings.run_ms)
        yield run_s / 2
        with transaction(self.sessions) as session:  # the Heartbeat thread's one step
            alive = lease_running.heartbeat(session, lease_id=spec.lease_id)
        if not alive:  # the worker exits at once (LEASE_LOST_EXIT); nothing is committed
            self._end(job, "lease_lost", JobState.FAILED, "lease taken away")
            return
        yield run_s / 2
        flops = rng.randint(10**9, 10**12)
        trial = TrialOutcome(
            trial_index=0,
            seed=rng.randrange(2**31),
            status="ok",
            config={"lr": round(rng.uniform(1e-4, 1e-1), 6)},
            flops_measured=flops,
            dev_error=rng.random(),
            wall_time_s=run_s,
            peak_memory_bytes=rng.randint(10**6, 10**9),
        )
        with transaction(self.sessions) as session:  # StreamRunner._search's on_trial
            trial_id = records.record_trial(session, task_run_id=run_id, outcome=trial).id
        outcome = TaskOutcome(
            order=order,
            best_trial_index=0,
            error=rng.random(),
            split=eval_split(phase),
            metric="accuracy" if kinds[order] == "single" else "map",
            flops=float(flops + rng.randint(10**6, 10**9)),
            wall_time_s=run_s,
            peak_memory_bytes=trial.peak_memory_bytes or 0,
            state_key=f"runs/{spec.submission_id}/task-{order:03d}/attempt-{attempt}/state",
        )
        with transaction(self.sessions) as session:  # StreamRunner._run_task's commit
            records.commit_task(
                session,
                submission=session.get(Submission, spec.submission_id),
                run=session.get(TaskRun, run_id),
                best_trial=session.get(Trial, trial_id),
                outcome=outcome,
                next_order=after[order],
            )
        with transaction(self.sessions) as session:  # run_task's last step
            lease_running.finish_success(session, lease_id=spec.lease_id)
        self._end(job, "committed", JobState.SUCCEEDED)


class SimBackend:
    """A :class:`~services.coordinator.backends.base.Backend` whose jobs are simulated
    workers of this process (:class:`WorkerPool`). It knows only its own jobs: another
    replica's are ``UNKNOWN`` to it, so the reaper judges them by heartbeats and deadlines."""

    name = "sim"

    def __init__(self, pool: WorkerPool, replica: str) -> None:
        self.pool, self.replica = pool, replica

    def launch(self, spec: LaunchSpec) -> str:
        job_id = f"sim:{self.replica}:{spec.job_name}"
        self.pool.submit(spec, job_id)
        return job_id

    def status(self, job_id: str) -> JobStatus:
        return self.pool.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.pool.cancel(job_id)

    def reap(self) -> None:
        return None


class _CountingHandler(logging.Handler):
    """Counts the scheduler's log records: warnings and errors, and lost claims."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter[str] = Counter()
        self.samples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            self.counts[record.levelname.lower()] += 1
            if len(self.samples) < MAX_ERRORS_KEPT:
                self.samples.append(f"{record.levelname}: {message}"[:500])
        elif message.startswith("claim lost"):
            self.counts["claims_lost"] += 1


def run_replica(config_path: Path) -> int:
    """One coordinator replica: the real scheduler loop with the simulated backend, until
    SIGTERM (or its parent dies); then its figures go to the config's ``out`` file."""
    config = json.loads(config_path.read_text())
    settings = get_coordinator_settings()  # from the NEVIS_* variables, as a deployment
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    counting = _CountingHandler()
    logging.getLogger("nevis.scheduler").addHandler(counting)
    logging.getLogger("nevis.scheduler").setLevel(logging.INFO)
    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    pool = WorkerPool(
        settings,
        sessions,
        threads=config["threads"],
        timings=Timings(tuple(config["start_ms"]), tuple(config["run_ms"])),
        crash_rate=config["crash_rate"],
        seed=config["seed"],
    )
    scheduler = Scheduler(settings, backend=SimBackend(pool, settings.replica_name or "sim"), sessions=sessions)
    parent = os.getppid()
    pool.start()
    scheduler.start()
    Path(config["ready"]).write_text(scheduler.owner)
    while not stop.wait(0.5):
        if os.getppid() != parent:  # the orchestrator is gone: do not outlive it
            break
    scheduler.stop()
    pool.stop()
    sample = scheduler.metrics.registry.get_sample_value
    expired = {
        kind: sample("nevis_scheduler_leases_expired_total", {"kind": kind}) or 0
        for kind in ("not_started", "heartbeat", "deadline", "job_ended")
    }
    figures = {
        "replica": scheduler.replica,
        "owner": scheduler.owner,
        "ticks": sample("nevis_scheduler_ticks_total") or 0,
        "tick_errors": sample("nevis_scheduler_tick_errors_total") or 0,
        "launches": sample("nevis_scheduler_launches_total", {"backend": "sim"}) or 0,
        "launch_failures": sample("nevis_scheduler_launch_failures_total", {"backend": "sim"}) or 0,
        "expired": expired,
        "log": dict(counting.counts),
        "log_samples": counting.samples,
        "launch_log": pool.launches,
        "outcomes": pool.outcomes,
        "worker_errors": pool.error_count,
        "worker_error_samples": pool.errors,
    }
    Path(config["out"]).write_text(json.dumps(figures))
    engine.dispose()
    return 0
