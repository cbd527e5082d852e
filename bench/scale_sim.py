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

What it prints, and its exit code: bench/scale_sim_report.py.

Usage::

    python bench/scale_sim.py                       # 1,000 x 106, 3 replicas (long)
    python bench/scale_sim.py --submissions 100 --tasks 20 --max-minutes 10
    python bench/scale_sim.py --slots 8 --cluster-slots 20 --crash-rate 0.02

Every figure is wall time on this machine: the replicas, their simulated workers and
PostgreSQL share its CPUs, so figures of a busy machine are lower bounds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Siblings in bench/ (on sys.path when this file runs as a script).
from scale_sim_replica import TERMINAL, SimBackend, Timings, WorkerPool, run_replica
from scale_sim_report import analyse, print_report
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.scheduler import slots
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, transaction, upgrade
from services.store.db.models import Submission, TaskResult
from workers.stream.manifest import manifest_to_dict
from workers.stream.manifest_files import load_stream

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
FULL_STREAM = "nevis22-full"
SIM_STREAM = "scale-sim"


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
    return create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args={"connect_timeout": 5})


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
        "NEVIS_DATABASE_URL": url,
        "NEVIS_DATA_DIR": str(workdir / "data"),
        "NEVIS_STREAMS_DIR": str(workdir / "streams"),
        "NEVIS_SCHEDULER_SLOTS": str(config.slots_per_replica),
        "NEVIS_POLL_INTERVAL_S": str(config.poll_s),
        "NEVIS_HEARTBEAT_INTERVAL_S": "10",
        "NEVIS_HEARTBEAT_TIMEOUT_S": "120",
        "NEVIS_START_TIMEOUT_S": "600",
        "NEVIS_TASK_DEADLINE_S": "3600",
        "NEVIS_MAX_ATTEMPTS": "20",
        "NEVIS_BACKOFF_BASE_S": "0.5",
        "NEVIS_BACKOFF_MAX_S": "2",
    }
    if config.cluster_slots is not None:
        env["NEVIS_CLUSTER_SLOTS"] = str(config.cluster_slots)
    return env


def create_submissions(
    config: SimConfig, settings: CoordinatorSettings, sessions: sessionmaker[Session], stream: str
) -> list[int]:
    """``config.submissions`` queued submissions, spread over ``config.users`` users, made
    by the coordinator's crud functions (what ``POST /v1/submissions`` does)."""
    count = config.submissions
    owners = min(config.users, count)
    made: list[int] = []
    per_user = [count // owners + (1 if i < count % owners else 0) for i in range(owners)]
    for i, share in enumerate(per_user):
        with transaction(sessions) as session:
            user = users.create_user(
                session, name=f"sim-user-{i:04d}", role="submitter", max_concurrent=share, max_per_day=share
            )
            learner = learners.create_learner(
                session,
                owner=user,
                name=f"sim-learner-{i:04d}",
                entrypoint="nevis_sim:learner",
                image=None,
                resources=ResourceRequest(),
            ).learner
        request = submission_create.SubmissionRequest(
            learner_id=learner.id, stream=stream, phase="meta_test", budget=RunBudget(trials=1, steps=1)
        )
        for _ in range(share):  # one transaction each, as POST /v1/submissions commits it:
            # a submission is eligible from its created_at, so it must be visible from then
            with transaction(sessions) as session:
                user = session.merge(user)
                made.append(
                    submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id
                )
    return made


def _progress(sessions: sessionmaker[Session]) -> tuple[int, int, int]:
    """(tasks committed, submissions ended, leases in flight)."""
    with sessions() as session:
        committed = session.scalar(select(func.count()).select_from(TaskResult)) or 0
        ended = session.scalar(select(func.count()).select_from(Submission).where(Submission.status.in_(TERMINAL))) or 0
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
            database_url=state.url,
            data_dir=workdir / "data",
            streams_dir=workdir / "streams",
            scheduler_slots=config.slots_per_replica,
            cluster_slots=config.cluster_slots,
            meta_test_quota=max(1, config.submissions),
        )  # one learner per user, many meta-test runs
        engine = make_engine(state.url)
        sessions = session_factory(engine)
        names = [f"sim-{chr(ord('a') + i)}" if config.replicas <= 26 else f"sim-{i}" for i in range(config.replicas)]
        for i, name in enumerate(names):
            cfg = {
                "threads": config.threads,
                "start_ms": list(config.start_ms),
                "run_ms": list(config.run_ms),
                "crash_rate": config.crash_rate,
                "seed": config.seed * 1000 + i,
                "ready": str(workdir / f"{name}.ready"),
                "out": str(workdir / f"{name}.json"),
            }
            cfg_path = workdir / f"{name}.config.json"
            cfg_path.write_text(json.dumps(cfg))
            log_file = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log_file)
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), "--replica-config", str(cfg_path)],
                    env={**os.environ, **env, "NEVIS_REPLICA_NAME": name},
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        ready_by = time.monotonic() + 120
        while not all((workdir / f"{name}.ready").exists() for name in names):
            if any(p.poll() is not None for p in procs) or time.monotonic() > ready_by:
                raise RuntimeError(f"a replica did not start; see the logs in {workdir}")
            time.sleep(0.2)
        _say(
            config,
            f"{config.replicas} replicas up; creating {config.submissions} submissions "
            f"x {config.tasks} tasks ({stream})",
        )
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
                _say(
                    config,
                    f"  {now - started:6.0f} s: {committed}/{total} tasks committed "
                    f"({rate:.0f}/min), {ended}/{len(ids)} submissions ended, "
                    f"{active} leases in flight",
                )
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
    parser.add_argument(
        "--slots",
        type=int,
        default=None,
        help="NEVIS_SCHEDULER_SLOTS per replica (default: enough for every submission to have its task in flight)",
    )
    parser.add_argument("--cluster-slots", type=int, default=None, help="NEVIS_CLUSTER_SLOTS")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=120.0)
    parser.add_argument("--poll-s", type=float, default=1.0, help="NEVIS_POLL_INTERVAL_S")
    parser.add_argument("--threads", type=int, default=4, help="simulated worker threads per replica")
    parser.add_argument("--start-ms", type=_range, default=(2.0, 20.0), help="a worker's start-up delay, LOW-HIGH ms")
    parser.add_argument("--run-ms", type=_range, default=(10.0, 100.0), help="a task's run time, LOW-HIGH ms")
    parser.add_argument(
        "--crash-rate", type=float, default=0.0, help="fraction of workers that die after starting their task"
    )
    parser.add_argument("--postgres-url", default=os.environ.get("NEVIS_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--keep-db", action="store_true", help="leave the database (its name is in the JSON report)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--replica-config", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replica_config is not None:
        return run_replica(args.replica_config)
    if min(args.submissions, args.replicas, args.users, args.threads) < 1:
        parser.error("--submissions, --replicas, --users and --threads must be >= 1")
    config = SimConfig(
        submissions=args.submissions,
        tasks=args.tasks,
        replicas=args.replicas,
        slots=args.slots,
        cluster_slots=args.cluster_slots,
        users=args.users,
        seed=args.seed,
        max_minutes=args.max_minutes,
        poll_s=args.poll_s,
        threads=args.threads,
        start_ms=args.start_ms,
        run_ms=args.run_ms,
        crash_rate=args.crash_rate,
        postgres_url=args.postgres_url,
        keep_db=args.keep_db,
        quiet=args.quiet,
    )
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
