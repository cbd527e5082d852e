"""Scale simulation of the coordinator: many submissions through several scheduler replicas
on one PostgreSQL database, with simulated workers that take the real harness path.

What runs:

- a fresh database ``nevis_scale_<random>`` on the PostgreSQL server (``--postgres-url``),
  migrated with the project's migrations and dropped at the end (also on failure);
- ``--replicas`` OS processes, each a coordinator replica: the real scheduler loop
  (:class:`~services.coordinator.scheduler.loop.Scheduler` on its thread), configured from
  the environment as a deployed one is (``NEVIS_REPLICA_NAME``, ``NEVIS_SCHEDULER_SLOTS``,
  ``NEVIS_CLUSTER_SLOTS``, ``NEVIS_POLL_INTERVAL_S``, ...), with the :class:`SimBackend`;
- the simulated backend hands each launched lease to a pool of simulated workers in its
  replica process. After a random start-up delay a worker does, against the database, what
  ``nevis worker run-task`` does: start the lease (compare-and-set), read the submission's
  plan and caps, open a task run, heartbeat the lease, record a made-up trial (error, FLOPs),
  commit the task (result, totals, cursor: :func:`services.store.runs.records.commit_task`)
  and end the lease with ``finish_success``; a failure is settled as the worker does it.
  Nothing trains: a task "runs" for a random few milliseconds. ``--crash-rate`` makes a
  fraction of workers die after starting (the reaper must expire them and the task is
  launched again);
- ``--submissions`` submissions of ``--tasks`` tasks (the built-in ``nevis22-full`` stream
  for 106 tasks, else its first N tasks as a stream of its own), created through the
  coordinator's crud functions by ``--users`` users.

What it prints (from database timestamps, after the run): task transitions (lease claimed,
launched, started, ended; task run started, committed) in total and per minute, scheduling
delay p50 / p99 (from the task becoming eligible: the submission created, or the previous
task committed, to its first lease launched), double launches (two leases of one
submission active at once, a lease launched twice, two workers committing one task, or a
task committed twice: must be 0), slot over-subscription (more leases in flight than
``NEVIS_SCHEDULER_SLOTS`` on a replica, or than ``NEVIS_CLUSTER_SLOTS`` in all: must be 0)
and errors. The exit code is 1 on any double launch, over-subscription or error, 3 if the
run did not finish within ``--max-minutes``, else 0.

Usage::

    python bench/scale_sim.py                       # 1,000 x 106, 3 replicas (long)
    python bench/scale_sim.py --submissions 100 --tasks 20 --max-minutes 10
    python bench/scale_sim.py --slots 8 --cluster-slots 20 --crash-rate 0.02

Every figure is wall time on this machine: the replicas, their simulated workers and
PostgreSQL share its CPUs, so figures of a busy machine are lower bounds.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec
from services.coordinator.common.config import CoordinatorSettings, get_coordinator_settings
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submissions, users
from services.coordinator.scheduler import leases, slots
from services.coordinator.scheduler.loop import Scheduler
from services.coordinator.scheduler.policy import retry_policy
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, transaction, upgrade
from services.store.db.models import (
    Event,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, TaskLease
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from workers.stream.manifest import eval_split, manifest_to_dict
from workers.stream.manifest_files import load_stream
from workers.stream.versions import stored_manifest

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
FULL_STREAM = "nevis22-full"
SIM_STREAM = "scale-sim"
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

    def __init__(self, settings: CoordinatorSettings, sessions: sessionmaker[Session], *,
                 threads: int, timings: Timings, crash_rate: float, seed: int) -> None:
        self.settings, self.sessions = settings, sessions
        self.timings, self.crash_rate = timings, crash_rate
        self.rng = random.Random(seed)
        self.policy = retry_policy(settings)
        self._threads = [threading.Thread(target=self._work, name=f"sim-worker-{i}", daemon=True)
                         for i in range(threads)]
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
                lease = leases.take_lease(session, lease_id=job.spec.lease_id,
                                          expected=ACTIVE_LEASE_STATUSES)
                if lease is not None:
                    leases.settle_failure(session, lease=lease, status="failed",
                                          reason=reason[:4000], policy=self.policy)
        finally:
            self._end(job, "error", JobState.FAILED, reason)

    def _plan(self, session: Session, stream_version_id: int, phase: str
              ) -> tuple[dict[int, str], dict[int, int | None]]:
        """The phase's tasks of a stored stream version: order -> kind, order -> next order.
        A real worker reads the stored manifest once per task; workers are other machines, so
        the simulation reads it once per replica to keep its CPU for the coordinator."""
        key = (stream_version_id, phase)
        if key not in self._plans:
            tasks = stored_manifest(session.get(StreamVersion, stream_version_id)).tasks_of_phase(phase)
            orders = [t.order for t in tasks]
            self._plans[key] = ({t.order: t.kind for t in tasks},
                                dict(zip(orders, [*orders[1:], None], strict=True)))
        return self._plans[key]

    def _harness(self, job: _Job) -> Iterator[float]:
        """The database steps of ``nevis worker run-task`` for one lease, with made-up
        results; yields the seconds to wait before the next step."""
        spec, rng = job.spec, self.rng
        with transaction(self.sessions) as session:
            started = leases.start_lease(session, lease_id=spec.lease_id,
                                         submission_id=spec.submission_id,
                                         task_deadline_s=self.settings.task_deadline_s)
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
            run = records.start_task_run(session, submission=session.get(Submission, spec.submission_id),
                                         task=task)
            run_id, attempt = run.id, run.attempt
        if rng.random() < self.crash_rate:
            self._end(job, "crashed", JobState.FAILED, "the simulated worker died")
            return  # no heartbeat, no commit: the reaper must act
        run_s = self._uniform(self.timings.run_ms)
        yield run_s / 2
        with transaction(self.sessions) as session:  # the Heartbeat thread's one step
            alive = leases.heartbeat(session, lease_id=spec.lease_id)
        if not alive:  # the worker exits at once (LEASE_LOST_EXIT); nothing is committed
            self._end(job, "lease_lost", JobState.FAILED, "lease taken away")
            return
        yield run_s / 2
        flops = rng.randint(10**9, 10**12)
        trial = TrialOutcome(trial_index=0, seed=rng.randrange(2**31), status="ok",
                             config={"lr": round(rng.uniform(1e-4, 1e-1), 6)},
                             flops_measured=flops, dev_error=rng.random(), wall_time_s=run_s,
                             peak_memory_bytes=rng.randint(10**6, 10**9))
        with transaction(self.sessions) as session:  # StreamRunner._search's on_trial
            trial_id = records.record_trial(session, task_run_id=run_id, outcome=trial).id
        outcome = TaskOutcome(
            order=order, best_trial_index=0, error=rng.random(), split=eval_split(phase),
            metric="accuracy" if kinds[order] == "single" else "map",
            flops=float(flops + rng.randint(10**6, 10**9)), wall_time_s=run_s,
            peak_memory_bytes=trial.peak_memory_bytes or 0,
            state_key=f"runs/{spec.submission_id}/task-{order:03d}/attempt-{attempt}/state")
        with transaction(self.sessions) as session:  # StreamRunner._run_task's commit
            records.commit_task(session, submission=session.get(Submission, spec.submission_id),
                                run=session.get(TaskRun, run_id), best_trial=session.get(Trial, trial_id),
                                outcome=outcome, next_order=after[order])
        with transaction(self.sessions) as session:  # run_task's last step
            leases.finish_success(session, lease_id=spec.lease_id)
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
    pool = WorkerPool(settings, sessions, threads=config["threads"],
                      timings=Timings(tuple(config["start_ms"]), tuple(config["run_ms"])),
                      crash_rate=config["crash_rate"], seed=config["seed"])
    scheduler = Scheduler(settings, backend=SimBackend(pool, settings.replica_name or "sim"),
                          sessions=sessions)
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
    expired = {kind: sample("nevis_scheduler_leases_expired_total", {"kind": kind}) or 0
               for kind in ("not_started", "heartbeat", "deadline", "job_ended")}
    figures = {
        "replica": scheduler.replica, "owner": scheduler.owner,
        "ticks": sample("nevis_scheduler_ticks_total") or 0,
        "tick_errors": sample("nevis_scheduler_tick_errors_total") or 0,
        "launches": sample("nevis_scheduler_launches_total", {"backend": "sim"}) or 0,
        "launch_failures": sample("nevis_scheduler_launch_failures_total", {"backend": "sim"}) or 0,
        "expired": expired, "log": dict(counting.counts), "log_samples": counting.samples,
        "launch_log": pool.launches, "outcomes": pool.outcomes,
        "worker_errors": pool.error_count, "worker_error_samples": pool.errors,
    }
    Path(config["out"]).write_text(json.dumps(figures))
    engine.dispose()
    return 0


# --- the orchestrator -------------------------------------------------------------------


@dataclass
class SimConfig:
    submissions: int = 1000
    tasks: int = 106
    replicas: int = 3
    slots: int | None = None  # NEVIS_SCHEDULER_SLOTS; None: every submission may be in flight
    cluster_slots: int | None = None  # NEVIS_CLUSTER_SLOTS
    users: int = 50
    seed: int = 0
    max_minutes: float = 120.0
    poll_s: float = 1.0
    threads: int = 4
    start_ms: tuple[float, float] = (2.0, 20.0)
    run_ms: tuple[float, float] = (10.0, 100.0)
    crash_rate: float = 0.0
    postgres_url: str = DEFAULT_POSTGRES_URL
    keep_db: bool = False
    quiet: bool = False

    @property
    def slots_per_replica(self) -> int:
        return self.slots or max(1, math.ceil(self.submissions / self.replicas))


@dataclass
class RunState:
    """What the orchestrator saw while the run went."""

    database: str = ""
    url: str = ""
    workdir: str = ""
    finished: bool = False
    wall_s: float = 0.0
    create_s: float = 0.0
    replica_exit_codes: list[int | None] = field(default_factory=list)
    replica_figures: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _say(config: SimConfig, message: str) -> None:
    if not config.quiet:
        print(message, file=sys.stderr, flush=True)


def _admin(url: str):
    return create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool,
                         connect_args={"connect_timeout": 5})


def create_database(admin_url: str) -> tuple[str, str]:
    """A fresh database at the head revision; returns its name and URL."""
    name = f"nevis_scale_{uuid.uuid4().hex[:10]}"
    engine = _admin(admin_url)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    return name, url


def drop_database(admin_url: str, name: str) -> None:
    engine = _admin(admin_url)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        engine.dispose()


def write_stream(folder: Path, tasks: int) -> str:
    """The stream the submissions run: ``nevis22-full`` for its 106 tasks, else its first
    ``tasks`` tasks under a name of their own; returns the name to submit."""
    full = load_stream(FULL_STREAM)
    if tasks == len(full.tasks):
        return FULL_STREAM
    if not 1 <= tasks <= len(full.tasks):
        raise SystemExit(f"--tasks must be in [1, {len(full.tasks)}]; got {tasks}")
    doc = manifest_to_dict(full)
    doc.update(name=SIM_STREAM, version=f"first-{tasks}", tasks=doc["tasks"][:tasks])
    (folder / f"{SIM_STREAM}.json").write_text(json.dumps(doc))
    return SIM_STREAM


def _settings_env(config: SimConfig, url: str, workdir: Path) -> dict[str, str]:
    env = {
        "NEVIS_DATABASE_URL": url, "NEVIS_DATA_DIR": str(workdir / "data"),
        "NEVIS_STREAMS_DIR": str(workdir / "streams"),
        "NEVIS_SCHEDULER_SLOTS": str(config.slots_per_replica),
        "NEVIS_POLL_INTERVAL_S": str(config.poll_s),
        "NEVIS_HEARTBEAT_INTERVAL_S": "10", "NEVIS_HEARTBEAT_TIMEOUT_S": "120",
        "NEVIS_START_TIMEOUT_S": "600", "NEVIS_TASK_DEADLINE_S": "3600",
        "NEVIS_MAX_ATTEMPTS": "20", "NEVIS_BACKOFF_BASE_S": "0.5", "NEVIS_BACKOFF_MAX_S": "2",
    }
    if config.cluster_slots is not None:
        env["NEVIS_CLUSTER_SLOTS"] = str(config.cluster_slots)
    return env


def create_submissions(config: SimConfig, settings: CoordinatorSettings,
                       sessions: sessionmaker[Session], stream: str) -> list[int]:
    """``config.submissions`` queued submissions, spread over ``config.users`` users, made
    by the coordinator's crud functions (what ``POST /v1/submissions`` does)."""
    count = config.submissions
    owners = min(config.users, count)
    made: list[int] = []
    per_user = [count // owners + (1 if i < count % owners else 0) for i in range(owners)]
    for i, share in enumerate(per_user):
        with transaction(sessions) as session:
            user = users.create_user(session, name=f"sim-user-{i:04d}", role="submitter",
                                     max_concurrent=share, max_per_day=share)
            learner = learners.create_learner(
                session, owner=user, name=f"sim-learner-{i:04d}", entrypoint="nevis_sim:learner",
                image=None, resources=ResourceRequest()).learner
        request = submissions.SubmissionRequest(learner_id=learner.id, stream=stream,
                                                phase="meta_test",
                                                budget=RunBudget(trials=1, steps=1))
        for start in range(0, share, 50):
            with transaction(sessions) as session:
                user = session.merge(user)
                for _ in range(min(50, share - start)):
                    made.append(submissions.create_submission(
                        session, settings=settings, user=user, request=request)[0].id)
    return made


def _progress(sessions: sessionmaker[Session]) -> tuple[int, int, int]:
    """(tasks committed, submissions ended, leases in flight)."""
    with sessions() as session:
        committed = session.scalar(select(func.count()).select_from(TaskResult)) or 0
        ended = session.scalar(select(func.count()).select_from(Submission)
                               .where(Submission.status.in_(TERMINAL))) or 0
        active = slots.count_active(session)
    return committed, ended, active


def _stop_replicas(procs: list[subprocess.Popen], grace_s: float = 30.0) -> list[int | None]:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return [proc.returncode for proc in procs]


def simulate(config: SimConfig) -> tuple[dict[str, Any], RunState]:
    """Run the simulation end to end; returns the report and what happened."""
    state = RunState()
    workdir = Path(tempfile.mkdtemp(prefix="nevis-scale-"))
    state.workdir = str(workdir)
    (workdir / "streams").mkdir()
    (workdir / "data").mkdir()
    procs: list[subprocess.Popen] = []
    logs: list[Any] = []
    engine = None
    report: dict[str, Any] = {}
    try:
        state.database, state.url = create_database(config.postgres_url)
        _say(config, f"database {state.database} created and migrated")
        stream = write_stream(workdir / "streams", config.tasks)
        env = _settings_env(config, state.url, workdir)
        settings = CoordinatorSettings(
            database_url=state.url, data_dir=workdir / "data", streams_dir=workdir / "streams",
            scheduler_slots=config.slots_per_replica, cluster_slots=config.cluster_slots,
            meta_test_quota=max(1, config.submissions))  # one learner per user, many meta-test runs
        engine = make_engine(state.url)
        sessions = session_factory(engine)
        names = [f"sim-{chr(ord('a') + i)}" if config.replicas <= 26 else f"sim-{i}"
                 for i in range(config.replicas)]
        for i, name in enumerate(names):
            cfg = {"threads": config.threads, "start_ms": list(config.start_ms),
                   "run_ms": list(config.run_ms), "crash_rate": config.crash_rate,
                   "seed": config.seed * 1000 + i, "ready": str(workdir / f"{name}.ready"),
                   "out": str(workdir / f"{name}.json")}
            cfg_path = workdir / f"{name}.config.json"
            cfg_path.write_text(json.dumps(cfg))
            log_file = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log_file)
            procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--replica-config", str(cfg_path)],
                env={**os.environ, **env, "NEVIS_REPLICA_NAME": name}, stdin=subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True))
        ready_by = time.monotonic() + 120
        while not all((workdir / f"{name}.ready").exists() for name in names):
            if any(p.poll() is not None for p in procs) or time.monotonic() > ready_by:
                raise RuntimeError(f"a replica did not start; see the logs in {workdir}")
            time.sleep(0.2)
        _say(config, f"{config.replicas} replicas up; creating {config.submissions} submissions "
                     f"x {config.tasks} tasks ({stream})")
        started = time.monotonic()
        ids = create_submissions(config, settings, sessions, stream)
        state.create_s = time.monotonic() - started
        total = len(ids) * config.tasks
        deadline = started + config.max_minutes * 60
        last_note = 0.0
        while True:
            committed, ended, active = _progress(sessions)
            now = time.monotonic()
            if ended == len(ids) and active == 0:
                state.finished = True
                break
            dead = [i for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                state.problems.append(f"replica(s) {dead} exited early; see {workdir}")
                break
            if now > deadline:
                state.problems.append(f"not finished within --max-minutes {config.max_minutes:g}")
                break
            if now - last_note >= 10:
                rate = committed / max(now - started, 1e-9) * 60
                _say(config, f"  {now - started:6.0f} s: {committed}/{total} tasks committed "
                             f"({rate:.0f}/min), {ended}/{len(ids)} submissions ended, "
                             f"{active} leases in flight")
                last_note = now
            time.sleep(1.0)
        state.wall_s = time.monotonic() - started
        state.replica_exit_codes = _stop_replicas(procs)
        for i, (name, proc) in enumerate(zip(names, procs, strict=True)):
            out = workdir / f"{name}.json"
            if out.exists():
                state.replica_figures.append(json.loads(out.read_text()))
            else:
                state.problems.append(f"replica {i} wrote no figures (exit {proc.returncode})")
        _say(config, "analysing the database ...")
        report = analyse(sessions, config=config, state=state, submission_ids=ids)
        return report, state
    finally:
        if procs:
            _stop_replicas(procs, grace_s=10)
        for log_file in logs:
            log_file.close()
        if engine is not None:
            engine.dispose()
        if state.database and not config.keep_db:
            drop_database(config.postgres_url, state.database)
        if state.problems or report.get("verdict", {}).get("ok") is False:
            _say(config, f"replica logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


# --- analysis (from database timestamps) -------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _sweep(intervals: list[tuple[datetime, datetime | None]], cap: int) -> tuple[int, int]:
    """Peak of overlapping [start, end) intervals, and how many starts pushed it past ``cap``."""
    points = []
    for start, end in intervals:
        points.append((start, 1))
        if end is not None:
            points.append((end, -1))
    points.sort(key=lambda p: (p[0], p[1]))  # an end before a start at the same instant
    level = peak = over = 0
    for _, step in points:
        level += step
        peak = max(peak, level)
        if step > 0 and level > cap:
            over += 1
    return peak, over


def analyse(sessions: sessionmaker[Session], *, config: SimConfig, state: RunState,
            submission_ids: list[int]) -> dict[str, Any]:
    """The run's figures, read back from the database and the replicas' launch logs."""
    with sessions() as session:
        subs = {row.id: row for row in session.execute(
            select(Submission.id, Submission.created_at, Submission.status, Submission.error))}
        lease_rows = session.execute(select(
            TaskLease.id, TaskLease.submission_id, TaskLease.task_order, TaskLease.attempt,
            TaskLease.status, TaskLease.owner, TaskLease.created_at, TaskLease.started_at,
            TaskLease.finished_at, TaskLease.error).order_by(TaskLease.id)).all()
        launched_at = {int(payload["lease_id"]): at for payload, at in session.execute(
            select(Event.payload, Event.created_at).where(Event.kind == "lease.launched"))}
        results = session.execute(
            select(TaskResult.submission_id, StreamTask.order, TaskResult.committed_at)
            .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)).all()
        succeeded_runs = session.execute(
            select(TaskRun.submission_id, TaskRun.stream_task_id, func.count())
            .where(TaskRun.status == "succeeded")
            .group_by(TaskRun.submission_id, TaskRun.stream_task_id)
            .having(func.count() > 1)).all()
        kinds = Counter(dict(session.execute(
            select(Event.kind, func.count()).where(
                Event.kind.like("lease.%") | Event.kind.like("task.%")).group_by(Event.kind)).all()))
        span = session.execute(
            select(func.min(Event.created_at), func.max(Event.created_at)).where(
                Event.kind.like("lease.%") | Event.kind.like("task.%"))).one()
        per_minute: list[tuple[int, int]] = []
        if span[0] is not None:
            bucket = func.floor(func.extract("epoch", Event.created_at - span[0]) / 60)
            per_minute = [(int(m), int(n)) for m, n in session.execute(
                select(bucket, func.count()).where(
                    Event.kind.like("lease.%") | Event.kind.like("task.%"))
                .group_by(bucket).order_by(bucket))]

    # the replicas' own logs: launch() calls and what each worker did
    launch_calls: Counter[int] = Counter()
    worker_outcomes: dict[int, str] = {}
    for figures in state.replica_figures:
        for lease_id, _sub, _order in figures["launch_log"]:
            launch_calls[lease_id] += 1
        worker_outcomes.update({int(k): v for k, v in figures["outcomes"].items()})
    by_task: dict[tuple[int, int], list[Any]] = defaultdict(list)
    by_sub: dict[int, list[Any]] = defaultdict(list)
    for row in lease_rows:
        by_task[(row.submission_id, row.task_order)].append(row)
        by_sub[row.submission_id].append(row)

    # double launches, four ways; a task is counted once however many ways it shows
    flagged: dict[str, set[tuple[int, int]]] = {
        "overlapping_leases": set(), "lease_launched_twice": set(),
        "two_workers_committed": set(), "task_committed_twice": set()}
    for rows in by_sub.values():
        rows = sorted(rows, key=lambda r: (r.created_at, r.id))
        for before, after in itertools.pairwise(rows):
            if before.finished_at is None or after.created_at < before.finished_at:
                flagged["overlapping_leases"].add((after.submission_id, after.task_order))
    lease_task = {row.id: (row.submission_id, row.task_order) for row in lease_rows}
    for lease_id, calls in launch_calls.items():
        if calls > 1:
            flagged["lease_launched_twice"].add(lease_task.get(lease_id, (0, lease_id)))
    for task, rows in by_task.items():
        if sum(worker_outcomes.get(r.id) == "committed" for r in rows) > 1:
            flagged["two_workers_committed"].add(task)
    result_count = Counter((sub, order) for sub, order, _ in results)
    flagged["task_committed_twice"] |= {task for task, n in result_count.items() if n > 1}
    with sessions() as session:
        orders = dict(session.execute(select(StreamTask.id, StreamTask.order)).all())
    flagged["task_committed_twice"] |= {(sub, orders[task]) for sub, task, _ in succeeded_runs}
    double = set().union(*flagged.values())

    # every task committed exactly once?
    expected = {(sub, order) for sub in submission_ids for order in range(1, config.tasks + 1)}
    committed = set(result_count)
    missing = len(expected - committed)

    # scheduling delay: eligible (created / previous task committed) -> first lease launched
    committed_at = {(sub, order): at for sub, order, at in results}
    delays, claim_delays = [], []
    for (sub, order), rows in by_task.items():
        first = min(rows, key=lambda r: r.id)
        eligible = subs[sub].created_at if order == 1 else committed_at.get((sub, order - 1))
        if eligible is None:
            continue
        claim_delays.append((first.created_at - eligible).total_seconds())
        if first.id in launched_at:
            delays.append((launched_at[first.id] - eligible).total_seconds())

    # slots: leases in flight per replica and in all, from their [claimed, ended) intervals
    per_replica: dict[str, list[tuple[datetime, datetime | None]]] = defaultdict(list)
    for row in lease_rows:
        per_replica[row.owner.split(":", 1)[0]].append((row.created_at, row.finished_at))
    slots = config.slots_per_replica
    replica_peaks, over = {}, 0
    for replica, intervals in sorted(per_replica.items()):
        peak, excess = _sweep(intervals, slots)
        replica_peaks[replica] = {"leases": len(intervals), "peak_in_flight": peak}
        over += excess
    cluster_peak, cluster_over = _sweep([iv for ivs in per_replica.values() for iv in ivs],
                                        config.cluster_slots or 10**9)
    over += cluster_over

    # errors
    statuses = Counter(row.status for row in subs.values())
    lease_statuses = Counter(row.status for row in lease_rows)
    outcome_counts = Counter(worker_outcomes.values())
    tick_errors = sum(f["tick_errors"] for f in state.replica_figures)
    worker_errors = sum(f["worker_errors"] for f in state.replica_figures)
    launch_failures = sum(f["launch_failures"] for f in state.replica_figures)
    expired = Counter()
    for f in state.replica_figures:
        expired.update(f["expired"])
    unexpected_expiries = sum(expired.values()) - (outcome_counts["crashed"] if config.crash_rate else 0)
    failed_subs = {sid: row.error for sid, row in subs.items() if row.status != "succeeded"}
    errors = {
        "problems": state.problems,
        "replica_exit_codes": state.replica_exit_codes,
        "scheduler_tick_errors": tick_errors,
        "worker_errors": worker_errors,
        "launch_failures": launch_failures,
        "submissions_not_succeeded": len(failed_subs),
        "tasks_missing": missing,
        "leases_left_in_flight": sum(lease_statuses[s] for s in ACTIVE_LEASE_STATUSES),
        # launched, but its worker found nothing to run (submission ended, task committed)
        "wasted_launches": outcome_counts["refused"],
        "unexpected_expiries": max(0, unexpected_expiries),
        "samples": ([f"submission {sid}: {err}" for sid, err in list(failed_subs.items())[:5]]
                    + [s for f in state.replica_figures for s in f["worker_error_samples"]][:5]
                    + [s for f in state.replica_figures for s in f["log_samples"]][:5]),
    }
    error_total = (len(state.problems) + tick_errors + worker_errors + launch_failures
                   + len(failed_subs) + missing + errors["leases_left_in_flight"]
                   + errors["wasted_launches"]
                   + errors["unexpected_expiries"]
                   + sum(1 for c in state.replica_exit_codes if c not in (0, None)))
    transitions = sum(kinds.values())
    active_minutes = ((span[1] - span[0]).total_seconds() / 60) if span[0] is not None else 0.0
    return {
        "size": {"submissions": len(submission_ids), "tasks": config.tasks,
                 "task_total": len(expected), "replicas": config.replicas,
                 "slots_per_replica": slots, "cluster_slots": config.cluster_slots,
                 "users": min(config.users, len(submission_ids)), "poll_s": config.poll_s,
                 "worker_threads_per_replica": config.threads, "start_ms": config.start_ms,
                 "run_ms": config.run_ms, "crash_rate": config.crash_rate, "seed": config.seed},
        "finished": state.finished,
        "wall_s": round(state.wall_s, 1), "create_submissions_s": round(state.create_s, 1),
        "transitions": {"total": transitions,
                        "per_minute": round(transitions / active_minutes, 1) if active_minutes else None,
                        "by_kind": dict(sorted(kinds.items())),
                        "per_minute_series": per_minute,
                        "tasks_committed": len(results),
                        "tasks_committed_per_minute": (round(len(results) / active_minutes, 1)
                                                       if active_minutes else None)},
        "scheduling_delay_s": {
            "to_launch": {"n": len(delays), "p50": _percentile(delays, 50),
                          "p90": _percentile(delays, 90), "p99": _percentile(delays, 99),
                          "max": max(delays, default=None)},
            "to_claim": {"n": len(claim_delays), "p50": _percentile(claim_delays, 50),
                         "p99": _percentile(claim_delays, 99)}},
        "double_launches": {"total": len(double),
                            **{k: len(v) for k, v in flagged.items()},
                            "examples": sorted(double)[:10]},
        "relaunched_tasks": sum(1 for rows in by_task.values() if len(rows) > 1),
        "over_subscription": {"total": over, "cluster_over": cluster_over,
                              "cluster_peak_in_flight": cluster_peak, "replicas": replica_peaks},
        "leases": dict(lease_statuses), "worker_outcomes": dict(outcome_counts),
        "expired": dict(expired), "submissions": dict(statuses),
        "scheduler": {f["replica"]: {"ticks": f["ticks"], "launches": f["launches"],
                                     "claims_lost": f["log"].get("claims_lost", 0)}
                      for f in state.replica_figures},
        "errors": {"total": error_total, **errors},
        "verdict": {"ok": not double and not over and not error_total},
    }


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def print_report(report: dict[str, Any]) -> None:
    size, tr = report["size"], report["transitions"]
    delay, dl = report["scheduling_delay_s"]["to_launch"], report["double_launches"]
    claim = report["scheduling_delay_s"]["to_claim"]
    over, errors = report["over_subscription"], report["errors"]
    cluster = size["cluster_slots"] if size["cluster_slots"] is not None else "unset"
    print(f"size: {size['submissions']} submissions x {size['tasks']} tasks = "
          f"{size['task_total']} tasks, {size['replicas']} replicas on one PostgreSQL, "
          f"{size['users']} users")
    print(f"      slots {size['slots_per_replica']}/replica, cluster slots {cluster}, poll "
          f"{size['poll_s']:g} s, {size['worker_threads_per_replica']} worker threads/replica, "
          f"start {size['start_ms'][0]:g}-{size['start_ms'][1]:g} ms, task "
          f"{size['run_ms'][0]:g}-{size['run_ms'][1]:g} ms, crash rate {size['crash_rate']:g}, "
          f"seed {size['seed']}")
    print(f"finished: {'yes' if report['finished'] else 'NO'} in {report['wall_s']:.0f} s "
          f"(submissions created in {report['create_submissions_s']:.0f} s)")
    print(f"task transitions: {tr['total']} total, {tr['per_minute']} per minute "
          f"({tr['tasks_committed']} tasks committed, {tr['tasks_committed_per_minute']} per minute)")
    print("  by kind: " + ", ".join(f"{k} {v}" for k, v in tr["by_kind"].items()))
    print("  per minute: " + " ".join(f"[{m}] {n}" for m, n in tr["per_minute_series"]))
    print(f"scheduling delay (eligible -> launched, {delay['n']} tasks): p50 {_ms(delay['p50'])}, "
          f"p90 {_ms(delay['p90'])}, p99 {_ms(delay['p99'])}, max {_ms(delay['max'])}; "
          f"to claim: p50 {_ms(claim['p50'])}, p99 {_ms(claim['p99'])}")
    print(f"double launches: {dl['total']} (overlapping leases {dl['overlapping_leases']}, "
          f"lease launched twice {dl['lease_launched_twice']}, two workers committed "
          f"{dl['two_workers_committed']}, task committed twice {dl['task_committed_twice']})"
          + (f" e.g. {dl['examples']}" if dl["total"] else ""))
    peaks = ", ".join(f"{r} {v['leases']} leases peak {v['peak_in_flight']}"
                      for r, v in over["replicas"].items())
    print(f"slot over-subscription: {over['total']} (cluster peak in flight "
          f"{over['cluster_peak_in_flight']}; {peaks})")
    print(f"relaunched tasks: {report['relaunched_tasks']}; leases {report['leases']}; "
          f"workers {report['worker_outcomes']}; expired {report['expired']}")
    print(f"scheduler: {report['scheduler']}")
    print(f"errors: {errors['total']} (tick errors {errors['scheduler_tick_errors']}, worker "
          f"errors {errors['worker_errors']}, launch failures {errors['launch_failures']}, "
          f"submissions not succeeded {errors['submissions_not_succeeded']}, tasks missing "
          f"{errors['tasks_missing']}, leases left in flight {errors['leases_left_in_flight']}, "
          f"unexpected expiries {errors['unexpected_expiries']}, wasted launches "
          f"{errors['wasted_launches']}, replica exits "
          f"{errors['replica_exit_codes']})")
    for line in errors["problems"] + (errors["samples"] if errors["total"] else []):
        print(f"  {line}")
    print(f"verdict: {'OK' if report['verdict']['ok'] else 'FAILED'}")


def _range(value: str) -> tuple[float, float]:
    low, _, high = value.partition("-")
    bounds = (float(low), float(high or low))
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH milliseconds, got {value!r}")
    return bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=106, help="tasks per submission (<= 106)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--slots", type=int, default=None,
                        help="NEVIS_SCHEDULER_SLOTS per replica (default: enough for every "
                        "submission to have its task in flight)")
    parser.add_argument("--cluster-slots", type=int, default=None, help="NEVIS_CLUSTER_SLOTS")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=120.0)
    parser.add_argument("--poll-s", type=float, default=1.0, help="NEVIS_POLL_INTERVAL_S")
    parser.add_argument("--threads", type=int, default=4, help="simulated worker threads per replica")
    parser.add_argument("--start-ms", type=_range, default=(2.0, 20.0),
                        help="a worker's start-up delay, LOW-HIGH ms")
    parser.add_argument("--run-ms", type=_range, default=(10.0, 100.0),
                        help="a task's run time, LOW-HIGH ms")
    parser.add_argument("--crash-rate", type=float, default=0.0,
                        help="fraction of workers that die after starting their task")
    parser.add_argument("--postgres-url", default=os.environ.get("NEVIS_TEST_POSTGRES_URL",
                                                                 DEFAULT_POSTGRES_URL))
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--keep-db", action="store_true",
                        help="leave the database (its name is in the JSON report)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--replica-config", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replica_config is not None:
        return run_replica(args.replica_config)
    if min(args.submissions, args.replicas, args.users, args.threads) < 1:
        parser.error("--submissions, --replicas, --users and --threads must be >= 1")
    config = SimConfig(
        submissions=args.submissions, tasks=args.tasks, replicas=args.replicas, slots=args.slots,
        cluster_slots=args.cluster_slots, users=args.users, seed=args.seed,
        max_minutes=args.max_minutes, poll_s=args.poll_s, threads=args.threads,
        start_ms=args.start_ms, run_ms=args.run_ms, crash_rate=args.crash_rate,
        postgres_url=args.postgres_url, keep_db=args.keep_db, quiet=args.quiet)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up as on Ctrl-C
    report, state = simulate(config)
    if not report:
        print(f"no report: {state.problems}", file=sys.stderr)
        return 1
    report["database"] = state.database if config.keep_db else None
    report["config"] = {k: v for k, v in asdict(config).items() if k != "postgres_url"}
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    if report["double_launches"]["total"] or report["over_subscription"]["total"]:
        return 1
    if not report["finished"]:
        return 3
    return 0 if report["verdict"]["ok"] else 1


__all__ = ["SimBackend", "SimConfig", "Timings", "WorkerPool", "analyse", "main", "simulate"]

if __name__ == "__main__":
    sys.exit(main())
