"""Chaos: N submissions through the real coordinator while its parts are killed at random.

What it proves: with the ``local`` backend on PostgreSQL, killing a trial's process, the
worker harness, the coordinator or the database at any point loses no task and commits none
twice, and the FLOPs of the attempts that were cut off are reported apart from cFLOP.

What it does, all on this machine and in one temporary folder:

1. starts its OWN PostgreSQL cluster (``initdb`` as the ``postgres`` OS user when run as
   root, on a free port, its socket in the cluster's folder), so restarting it disturbs no
   other server;
2. starts ``nevis serve`` (API, scheduler, ``local`` backend; each worker starts its own
   Ray) on it, makes a user and a token with ``nevis users create`` / ``nevis tokens
   create``, uploads a small learner as a bundle (nearest class mean; each trial sleeps
   1.5 s so there is time to hit one) and submits it N times on the built-in ``mini``
   stream (meta-train: its 3 first tasks; ``--phase meta_test``: all 5);
3. while they run, makes ``--kills`` kills of each kind, one after the other, in an order
   and with parameters drawn from ``random.Random(--seed)``. Kills wait for *kill points*,
   states read from the database and ``/proc``, never a clock: a running lease whose worker
   has not opened its task run yet (``starting``), has opened it (``started``), or has
   recorded a successful trial (``trial``), always with a whole trial still to come. A kill
   lets 0 or 1 points pass (none on the submissions' last tasks), waits up to a second, and
   strikes if the point still holds:

   - ``trial``: SIGKILL of the learner host process in a trial (``python -m
     workers.sandbox.host`` under the worker harness's process tree, found in ``/proc`` by
     its command line; the learner names it ``chaos-in-trial`` while it trains), or of the
     Ray worker (``ray::...``) that started it;
   - ``worker``: SIGKILL of the worker harness (``nevis worker run-task``); the first one
     strikes after a trial succeeded, so its attempt leaves FLOPs to report apart;
   - ``coordinator``: SIGKILL of ``nevis serve`` and, 0-2 s later, a new one on the same
     port and settings (its workers keep running);
   - ``postgres``: ``pg_ctl restart -m immediate`` or ``-m fast``;

4. waits for every submission to end and every lease to close, then checks from the
   database that every task of every submission has exactly one committed result (rows of
   ``task_results`` and ``task.committed`` events: no duplicate, no gap), that every
   submission succeeded (or names the ones that did not, with their error, e.g. attempts
   spent), and the FLOPs: cFLOP (the API's ``cflop``) is the sum of the committed results
   only; the API's ``retried_flops`` equals the FLOPs of the trials of every attempt that
   was not committed; the ``retried_flops`` column of each committed attempt equals the
   trials of its task's earlier attempts.

It prints N, the kills per kind (planned, attempted, effective), tasks committed,
duplicates, losses, retried FLOPs, wall time, and why attempts, trials and leases failed.
Exit status: 0 all well; 1 a loss, duplicate, failed submission or FLOP mismatch; 2 the
chaos run itself broke down (a server that never came up, the timeout).

``--node-kills K`` (``bench/chaos_nodes.py``) runs the ``ray`` backend on a two-node Ray
cluster on this machine instead (a head and a learner node, ``tests/support/ray_cluster.py``)
and makes K node kills and no other kind: SIGKILL of the learner node's raylet while a learner
host under it is in a trial, then a new learner node ``--node-down-s`` later; the verdict is the
same (every task committed exactly once, FLOPs accounted). Result: docs/deploy.md, section 10.

Usage (``--help`` lists every option)::

    .venv/bin/python bench/chaos.py --runs 6 --seed 1    # 3 kills of each kind
    .venv/bin/python bench/chaos.py --runs 2 --kills 1 --seed 7 --json out.json   # CI's size
    .venv/bin/python bench/chaos.py --runs 1 --node-kills 1 --slots 1 --seed 1   # a learner node lost

Needs PostgreSQL's server binaries (``--pg-bin``, default the newest
``/usr/lib/postgresql/*/bin``); as root it runs them as the ``postgres`` user (``runuser``).
Every process it starts carries ``NEVIS_CHAOS_RUN=<marker>`` in its environment and is
killed at the end, whatever happened (the learner hosts, which get an empty environment,
die with their parents); the cluster is stopped and the folder removed (``--keep`` keeps
it: logs of the server, the workers and PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import traceback
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's python is a symlink
NEVIS = VENV_BIN / "nevis"
KINDS = ("trial", "worker", "coordinator", "postgres", "node")  # node: --node-kills (bench/chaos_nodes.py)
MARKER = "NEVIS_CHAOS_RUN"  # in the environment of everything this script starts
LEARNER_MODULE = "chaos_learner"
TRIAL_SLEEP_S = 1.5
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours in Ray's error texts
TRIAL_COMM = "chaos-in-trial"  # the learner host's process name while it trains a trial
# Variables of the caller's own set-up that must not leak into the coordinator or workers.
DROPPED = (
    "NEVIS_WORKER_COMMAND",
    "NEVIS_BACKEND",
    "NEVIS_RAY_ADDRESS",
    "NEVIS_STORE_URL",
    "NEVIS_S3_ENDPOINT_URL",
    "NEVIS_STREAMS_DIR",
    "NEVIS_ENVIRONMENT",
    "NEVIS_DATABASE_URL",
    "NEVIS_DATA_DIR",
    "NEVIS_REPLICA_NAME",
    "NEVIS_CLUSTER_SLOTS",
    "RAY_ADDRESS",
    "PYTHONPATH",
    "PYTHONHOME",
)

# The learner: nearest class mean (numpy, reports its own FLOPs), each trial sleeping a
# little so that a trial can be caught running. It is uploaded as a bundle, so it is on no
# import path of the coordinator or the workers: only the learner hosts import it.
LEARNER_SOURCE = textwrap.dedent(f'''
    """Nearest class mean with slow trials: the learner of bench/chaos.py."""
    import pickle
    import time

    import numpy as np

    from workers.learners.protocol import Choice, Resources, TrainOutput

    TRIAL_SLEEP_S = {TRIAL_SLEEP_S!r}


    def _name(comm):
        """Name this process (its /proc comm) so that bench/chaos.py sees it is in a trial."""
        try:
            with open("/proc/self/comm", "w") as handle:
                handle.write(comm)
        except OSError:
            pass


    def _flat(images):
        return images.reshape(len(images), -1).astype(np.float32) / 255.0


    class SlowNearestMean:
        name = "chaos-nearest-mean"

        def search_space(self):
            return {{"shrink": Choice((0.0, 0.25, 0.5))}}

        def resources(self):
            return Resources()

        def init_state(self):
            return {{"tasks_seen": []}}

        def train(self, view, state, config, ctx):
            data = view.train()
            x = _flat(data.images)
            y = data.labels if data.labels.ndim == 2 else np.eye(view.info.num_classes)[data.labels]
            _name({TRIAL_COMM!r})
            time.sleep(TRIAL_SLEEP_S)
            _name("python")
            means = (y.T @ x) / np.maximum(y.sum(axis=0), 1.0)[:, None]
            means = (1 - config["shrink"]) * means + config["shrink"] * x.mean(axis=0)
            ctx.report_flops(2 * x.shape[0] * x.shape[1] * y.shape[1])
            for step in range(ctx.steps + 1):
                ctx.progress(step, means, loss=1.0 / (step + 1))
            return TrainOutput(predictor=means,
                               state={{"tasks_seen": [*state["tasks_seen"], view.info.order]}})

        def predict(self, predictor, images, ctx):
            x = _flat(images)
            ctx.report_flops(3 * x.shape[0] * x.shape[1] * predictor.shape[0])
            return -((x[:, None, :] - predictor[None, :, :]) ** 2).sum(axis=2)

        def features(self, predictor, images, ctx):
            return _flat(images)

        def save_predictor(self, predictor):
            return pickle.dumps(predictor)

        def load_predictor(self, data, info, ctx):
            return pickle.loads(data)


    def make():
        return SlowNearestMean()
''')


class ChaosError(RuntimeError):
    """The chaos run itself could not go on (a server that never came up, a timeout)."""


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- processes, through /proc ----------------------------------------------------------------


def proc_stat(pid: int) -> tuple[str, int, int, str] | None:
    """(state, parent pid, process group, start time in ticks) of a process; None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[-1].split()
    return fields[0], int(fields[1]), int(fields[2]), fields[19]


HOST_MODULES = {"workers.sandbox.host", "workers.sandbox.host_boot"}  # host_boot: python -I (issue 43)


def cmdline(pid: int) -> list[str]:
    try:
        return [p.decode(errors="replace") for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if p]
    except OSError:
        return []


def alive(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids, of every live process."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        if stat is not None and stat[0] not in ("Z", "X"):
            found.setdefault(stat[1], []).append(int(entry.name))
    return found


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    tree = children_map() if tree is None else tree
    out, stack = [], list(tree.get(pid, []))
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(tree.get(child, []))
    return out


def marked(marker: str) -> list[int]:
    """Live processes whose environment holds ``MARKER=marker`` (everything we started but
    the sandboxed learner hosts, which get an empty environment)."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> int:
    """SIGKILL every process carrying the marker and their descendants; returns how many
    were signalled."""
    victims: set[int] = set()
    for _ in range(5):  # processes may be starting children while we look
        tree = children_map()
        roots = marked(marker)
        current = {p for root in roots for p in (root, *descendants(root, tree))} - {os.getpid()}
        if not current:
            break
        for pid in current:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        victims |= current
        time.sleep(0.3)
    return len(victims)


# --- PostgreSQL ------------------------------------------------------------------------------


def default_pg_bin() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else Path("/usr/lib/postgresql/15/bin")


class Postgres:
    """A private PostgreSQL cluster in a temporary folder, run as the ``postgres`` user."""

    def __init__(self, root: Path, pg_bin: Path, *, os_user: str = "postgres") -> None:
        self.root, self.pg_bin, self.os_user = root, pg_bin, os_user
        self.data, self.sock, self.logfile = root / "data", root / "sock", root / "postgres.log"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/nevis"
        self.admin_url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.restarts = 0

    def _as_user(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [*argv]
        if os.geteuid() == 0 and self.os_user:
            command = ["runuser", "-u", self.os_user, "--", *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def _ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        options = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c max_connections=200"
        return self._as_user(
            str(self.pg_bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.logfile),
            "-o",
            options,
            "-w",
            "-t",
            "90",
            *args,
            timeout=timeout,
        )

    def init(self) -> None:
        if not (self.pg_bin / "initdb").exists():
            raise ChaosError(f"No initdb in {self.pg_bin}; pass --pg-bin (PostgreSQL's server binaries).")
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir()
        if os.geteuid() == 0 and self.os_user:
            shutil.chown(self.root, user=self.os_user)
            shutil.chown(self.sock, user=self.os_user)
        done = self._as_user(
            str(self.pg_bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        )
        if done.returncode != 0:
            raise ChaosError(f"initdb failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.start()
        engine = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(text("CREATE DATABASE nevis"))
        finally:
            engine.dispose()

    def start(self) -> None:
        done = self._ctl("start")
        if done.returncode != 0:
            raise ChaosError(f"pg_ctl start failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}\n{self.log_tail()}")

    def restart(self, mode: str) -> bool:
        done = self._ctl("restart", "-m", mode)
        if done.returncode != 0:
            log(f"pg_ctl restart -m {mode} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            if self.postmaster_pid() is None:
                self.start()
            return False
        self.restarts += 1
        return True

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if alive(pid) else None

    def stop(self) -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        pid = self.postmaster_pid()
        try:
            self._ctl("stop", "-m", "immediate", timeout=60)
        except subprocess.TimeoutExpired:
            pass
        if pid is not None and alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def log_tail(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


# --- the coordinator -------------------------------------------------------------------------


class Coordinator:
    """``nevis serve`` in its own process group; restarted on the same port and settings."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, *, timeout_s: float = 180) -> None:
        self.starts += 1
        log_path = self.logs / f"serve-{self.starts}.log"
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [str(NEVIS), "serve", "--port", str(self.port), "--log-level", "warning"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ChaosError(
                    f"nevis serve exited ({self.proc.returncode}):\n{log_path.read_text(errors='replace')[-3000:]}"
                )
            try:
                if httpx.get(f"{self.url}/readyz", timeout=3).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise ChaosError(
            f"nevis serve was not ready within {timeout_s:.0f} s:\n{log_path.read_text(errors='replace')[-3000:]}"
        )

    def kill(self) -> bool:
        """SIGKILL the server's process group (its workers have sessions of their own)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.proc.wait(timeout=30)
        return True

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


# --- the database, as the chaos driver sees it -------------------------------------------------


class Checked:
    """A :class:`Db` whose queries must answer (the verdict is read once all is quiet)."""

    def __init__(self, db: Db) -> None:
        self.db = db

    def rows(self, sql: str, **params) -> list[tuple]:
        rows = self.db.rows(sql, **params)
        if rows is None:
            raise ChaosError(f"the database did not answer: {' '.join(sql.split())[:200]}")
        return rows


class Db:
    """Short-lived connections (a restarted server drops pooled ones); None while it is down."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 3})

    def rows(self, sql: str, **params) -> list[tuple] | None:
        try:
            with self.engine.connect() as connection:
                return [tuple(row) for row in connection.execute(text(sql), params)]
        except DBAPIError:
            return None

    def dispose(self) -> None:
        self.engine.dispose()


@dataclass
class LeaseView:
    """A running lease with what the driver needs to pick a kill point."""

    lease_id: int
    submission_id: int
    order: int
    attempt: int
    worker_pid: int
    worker_ticks: str
    run_id: int | None  # the running task run of this lease's task, once the worker opened it
    trials: int  # trials recorded in that run
    ok_trials: int  # of which succeeded (a killed trial is recorded as failed, with no FLOPs)


RUNNING_SQL = """
SELECT l.id, l.submission_id, l.task_order, l.attempt, l.job_id, r.id,
       (SELECT count(*) FROM trials t WHERE t.task_run_id = r.id),
       (SELECT count(*) FROM trials t WHERE t.task_run_id = r.id AND t.status = 'succeeded')
FROM task_leases l
JOIN submissions s ON s.id = l.submission_id
JOIN stream_tasks st ON st.stream_version_id = s.stream_version_id AND st."order" = l.task_order
LEFT JOIN task_runs r ON r.submission_id = l.submission_id AND r.stream_task_id = st.id
     AND r.status = 'running' AND r.started_at >= l.started_at
WHERE l.status = 'running' AND l.job_id IS NOT NULL
ORDER BY l.id
"""


def running_leases(db: Db) -> list[LeaseView] | None:
    """The running leases with a job id, oldest first; None while the database is down."""
    rows = db.rows(RUNNING_SQL)
    if rows is None:
        return None
    out = []
    for lease_id, sub, order, attempt, job_id, run_id, trials, ok_trials in rows:
        parts = str(job_id).split(":")
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        out.append(
            LeaseView(
                lease_id, sub, order, attempt, int(parts[1]), parts[2], run_id, int(trials or 0), int(ok_trials or 0)
            )
        )
    return out


def worker_alive(view: LeaseView) -> bool:
    stat = proc_stat(view.worker_pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[3] == view.worker_ticks


def learner_hosts(worker_pid: int) -> list[int]:
    """Learner host processes (``python -I -m workers.sandbox.host_boot``, bare or in bwrap) under a
    worker harness, innermost first."""
    return learner_hosts_in(descendants(worker_pid))


def learner_hosts_in(pids: list[int]) -> list[int]:
    """The learner host processes among ``pids`` (not their bwrap parents)."""
    hosts = []
    for pid in pids:
        argv = cmdline(pid)
        if HOST_MODULES & set(argv) and (not argv or Path(argv[0]).name != "bwrap"):
            hosts.append(pid)
    return hosts


def ray_worker_of(host: int) -> int | None:
    """The Ray worker process (``ray::...``) a learner host was started by, if any."""
    stat = proc_stat(host)
    while stat is not None and stat[1] > 1:
        parent = stat[1]
        argv = cmdline(parent)
        if argv and argv[0].startswith("ray::"):
            return parent
        stat = proc_stat(parent)
    return None


def in_trial(pid: int) -> bool:
    """Whether a learner host is training a trial: the chaos learner names its process
    ``TRIAL_COMM`` while it does."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == TRIAL_COMM
    except OSError:
        return False


# --- the kill plan ---------------------------------------------------------------------------


@dataclass
class Kill:
    """One planned kill: its kind, how many opportunities to let pass first, and when to
    strike within the opportunity it takes."""

    kind: str
    skip: int
    stage: str  # "starting": no task run yet; "started": it is open; "trial": a trial done
    delay_s: float
    mode: str = ""  # postgres: immediate or fast; trial: the learner host or its Ray worker
    attempted: bool = False
    effective: bool = False
    target: str = ""
    trials_recorded: int | None = None  # succeeded trials of the attempt hit
    note: str = ""
    at_s: float | None = None


def _mode(rng: random.Random, kind: str) -> str:
    if kind == "postgres":
        return rng.choice(("immediate", "fast"))
    if kind == "trial":
        return rng.choice(("learner-host", "ray-worker"))
    return ""


def plan_kills(rng: random.Random, counts: dict[str, int]) -> list[Kill]:
    """``counts[kind]`` kills of each kind, in a random order, each with random parameters:
    how many kill points it lets pass (0 or 1), its stage (a worker kill's first is always
    after a trial is done, so its attempt leaves FLOPs to report apart), a delay of up to a
    second, and its mode (PostgreSQL: ``immediate`` or ``fast``; trial: the learner host or
    the Ray worker that started it)."""
    kills = []
    for kind in KINDS:
        for _ in range(counts.get(kind, 0)):
            if kind == "trial":
                stage = "started"
            else:
                stage = rng.choice(("starting", "started", "trial"))
            kills.append(
                Kill(
                    kind=kind,
                    skip=rng.randint(0, 1),
                    stage=stage,
                    delay_s=round(rng.uniform(0.0, 1.0), 2),
                    mode=_mode(rng, kind),
                )
            )
    rng.shuffle(kills)
    first_worker = next((k for k in kills if k.kind == "worker"), None)
    if first_worker is not None:
        first_worker.stage = "trial"  # its attempt leaves a trial behind: retried FLOPs
    return kills


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Report:
    """What a chaos run did and found (printed by :func:`render`, written by ``--json``)."""

    runs: int
    seed: int
    phase: str
    stream: str = "mini"
    tasks_expected: int = 0
    tasks_committed: int = 0
    duplicates: int = 0
    losses: int = 0
    submissions: dict[str, int] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    kills: dict[str, dict[str, int]] = field(default_factory=dict)
    kill_log: list[dict] = field(default_factory=list)
    attempts: int = 0
    retried_attempts: int = 0
    failed_trials: int = 0
    cflop: float = 0.0
    retried_flops: float = 0.0
    retried_flops_db: float = 0.0
    flop_problems: list[str] = field(default_factory=list)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    coordinator_starts: int = 0
    postgres_restarts: int = 0
    wall_s: float = 0.0
    error: str | None = None
    marker: str = ""  # the environment marker of every process the run started
    workdir: str = ""  # its temporary folder (removed at the end unless --keep)

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.losses == 0
            and self.duplicates == 0
            and not self.failed
            and not self.flop_problems
            and self.tasks_committed == self.tasks_expected
        )


class Chaos:
    """One chaos run: set-up, submissions, kills, verdict (:meth:`run`)."""

    def __init__(self, args: argparse.Namespace, root: Path, stack: ExitStack) -> None:
        self.args, self.root, self.stack = args, root, stack
        self.rng = random.Random(args.seed)
        self.marker = uuid.uuid4().hex
        self.report = Report(
            runs=args.runs, seed=args.seed, phase=args.phase, stream=args.stream, marker=self.marker, workdir=str(root)
        )
        self.pg = Postgres(root / "pg", args.pg_bin)
        self.env: dict[str, str] = {}
        self.coordinator: Coordinator | None = None
        self.db: Db | None = None
        self.headers: dict[str, str] = {}
        self.submissions: list[int] = []
        self.used_points: set[tuple[int, int]] = set()
        self.struck: set[int] = set()  # leases a kill was aimed at: the next kill takes another
        self.started = time.monotonic()

    # set-up ---------------------------------------------------------------------------------

    def setup(self) -> None:
        log(f"PostgreSQL cluster in {self.pg.root} on port {self.pg.port}")
        self.stack.callback(self.pg.stop)
        self.pg.init()
        data = self.root / "data"
        (self.root / "logs").mkdir()
        env = {k: v for k, v in os.environ.items() if k not in DROPPED}
        env.update(
            {
                MARKER: self.marker,
                "NEVIS_DATA_DIR": str(data),
                "NEVIS_DATABASE_URL": self.pg.url,
                "NEVIS_BACKEND": "local",
                "NEVIS_POLL_INTERVAL_S": "0.3",
                "NEVIS_HEARTBEAT_INTERVAL_S": "1",
                "NEVIS_HEARTBEAT_TIMEOUT_S": "20",
                "NEVIS_START_TIMEOUT_S": "180",
                "NEVIS_TASK_DEADLINE_S": "900",  # a hung task is reaped
                "NEVIS_MAX_ATTEMPTS": str(self.args.max_attempts),
                "NEVIS_BACKOFF_BASE_S": "0.5",
                "NEVIS_BACKOFF_MAX_S": "2",
                "NEVIS_SCHEDULER_SLOTS": str(self.args.slots),
                "NEVIS_PROBE_PRESET": "off",
                "NEVIS_QUOTA_CONCURRENT": str(self.args.runs),
                "NEVIS_QUOTA_DAILY": str(self.args.runs),
                "NEVIS_META_TEST_QUOTA": str(self.args.runs),  # --phase meta_test: N runs of one learner
                "RAY_AUTH_MODE": "disabled",
                "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_TMPDIR": str(self.root / "ray"),  # each worker's own Ray keeps its files here
            }
        )
        env.update(self.backend_env())
        self.env = env
        self.db = Db(self.pg.url)
        self.stack.callback(self.db.dispose)
        self.coordinator = Coordinator(env, self.root / "logs")
        self.stack.callback(self.coordinator.stop)
        self.coordinator.start()
        log(f"nevis serve ready on {self.coordinator.url}")
        self._nevis(
            "users",
            "create",
            "chaos",
            "--role",
            "submitter",
            "--max-concurrent",
            str(self.args.runs),
            "--max-per-day",
            str(self.args.runs),
        )
        token = self._nevis("tokens", "create", "--user", "chaos").strip().splitlines()[-1]
        self.headers = {"Authorization": f"Bearer {token}"}

    def backend_env(self) -> dict[str, str]:
        """Settings of the backend beyond ``local`` (the node kill's: bench/chaos_nodes.py)."""
        return {}

    def _nevis(self, *args: str) -> str:
        done = subprocess.run(
            [str(NEVIS), *args], env=self.env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            raise ChaosError(f"nevis {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def _api(self, method: str, path: str, **kwargs) -> httpx.Response:
        """A request to whichever server is up, retried while it restarts or the database does."""
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.request(
                    method, f"{self.coordinator.url}{path}", headers=self.headers, timeout=30, **kwargs
                )
                if response.status_code < 500:
                    return response
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ChaosError(f"{method} {path} kept failing for 120 s")
            time.sleep(0.5)

    def submit(self) -> None:
        folder = self.root / "bundle"
        (folder / f"{LEARNER_MODULE}-0.1").mkdir(parents=True)
        (folder / f"{LEARNER_MODULE}-0.1" / f"{LEARNER_MODULE}.py").write_text(LEARNER_SOURCE)
        archive = folder / f"{LEARNER_MODULE}-0.1.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder / f"{LEARNER_MODULE}-0.1", arcname=f"{LEARNER_MODULE}-0.1")
        with open(archive, "rb") as handle:
            made = httpx.post(
                f"{self.coordinator.url}/v1/learners/bundle",
                headers=self.headers,
                timeout=60,
                data={"name": "chaos-nearest-mean", "entrypoint": f"{LEARNER_MODULE}:make"},
                files={"file": (archive.name, handle, "application/gzip")},
            )
        if made.status_code != 201:
            raise ChaosError(f"uploading the learner failed: {made.status_code} {made.text}")
        learner_id = made.json()["id"]
        for number in range(self.args.runs):
            created = self._api(
                "POST",
                "/v1/submissions",
                json={
                    "learner_id": learner_id,
                    "stream": self.args.stream,
                    "phase": self.args.phase,
                    "budget": {"trials": self.args.trials, "steps": 3, "max_concurrent": 1, "seed": number},
                },
            )
            if created.status_code != 201:
                raise ChaosError(f"submitting failed: {created.status_code} {created.text}")
            self.submissions.append(created.json()["id"])
        log(f"submitted {len(self.submissions)} runs of {self.args.stream} ({self.args.phase})")

    # the kills --------------------------------------------------------------------------------

    def progress(self) -> tuple[int, int, bool] | None:
        """(open submissions, active leases, whether every open submission is at its last
        task); None while the database is down."""
        rows = self.db.rows("""
            SELECT (SELECT count(*) FROM submissions WHERE status IN ('queued', 'running')),
                   (SELECT count(*) FROM task_leases WHERE status IN ('launching', 'launched', 'running')),
                   (SELECT count(*) FROM submissions s WHERE s.status IN ('queued', 'running')
                    AND s.cursor < (SELECT max(st."order") FROM stream_tasks st
                                    WHERE st.stream_version_id = s.stream_version_id
                                    AND (s.phase = 'meta_test' OR st.phase = s.phase)))""")
        if rows is None:
            return None
        ((open_, active, before_last),) = rows
        return open_, active, before_last == 0

    def last_point(self) -> int:
        """The most trials a kill point may have recorded: a whole trial is still to run
        after it (so a kill lands before the task can commit), when the budget allows."""
        return self.args.trials - 2 if self.args.trials >= 3 else self.args.trials - 1

    def opportunity(self, kill: Kill, *, last_tasks: bool) -> tuple[LeaseView, int | None] | None:
        """A kill point not offered before, at the kill's stage, on a lease no kill hit yet
        (unless these are the last tasks); for a trial kill, with a learner host in a trial.

        A point is a running lease in a live worker that has not opened its task run yet
        (``starting``), or has, with so many trials recorded (``started``; ``trial`` once one
        succeeded), a whole trial still to come. None if there is none right now."""
        for view in running_leases(self.db) or []:
            point = (view.lease_id, -1 if view.run_id is None else view.trials)
            if point in self.used_points or not worker_alive(view):
                continue
            if view.lease_id in self.struck and not last_tasks:
                continue
            if (kill.stage == "starting") != (view.run_id is None):
                continue
            if view.trials > self.last_point() or (kill.stage == "trial" and view.ok_trials < 1):
                continue
            host = None
            if kill.kind == "trial":
                hosts = [p for p in learner_hosts(view.worker_pid) if in_trial(p)]
                if not hosts:
                    continue
                host = hosts[0]
            self.used_points.add(point)
            return view, host
        return None

    def trials_now(self, view: LeaseView) -> tuple[int, int] | None:
        """Trials recorded in the lease's run (all, succeeded) if the lease still runs in a
        live worker; None otherwise."""
        rows = self.db.rows(
            "SELECT l.status, (SELECT count(*) FROM trials t WHERE t.task_run_id = :r), "
            "(SELECT count(*) FROM trials t WHERE t.task_run_id = :r AND t.status = 'succeeded') "
            "FROM task_leases l WHERE l.id = :i",
            i=view.lease_id,
            r=view.run_id,
        )
        if not rows or rows[0][0] != "running" or not worker_alive(view):
            return None
        return int(rows[0][1]), int(rows[0][2])

    def strike(self, kill: Kill, view: LeaseView, host: int | None) -> None:
        kill.attempted, kill.at_s = True, round(time.monotonic() - self.started, 1)
        kill.trials_recorded = view.ok_trials
        where = "starting: no task run yet" if view.run_id is None else f"{view.ok_trials} trial(s) done"
        kill.target = (
            f"submission {view.submission_id} task {view.order} attempt {view.attempt} (lease {view.lease_id}, {where})"
        )
        if kill.kind == "trial":
            victim = host if kill.mode == "learner-host" else ray_worker_of(host)
            if victim is not None and alive(host) and in_trial(host):
                what = "learner host" if victim == host else f"Ray worker {' '.join(cmdline(victim))[:40]!r}"
                os.kill(victim, signal.SIGKILL)
                kill.effective, kill.note = True, f"{what} pid {victim} (in a trial)"
            else:
                kill.note = "the trial ended before the signal"
        elif kill.kind == "worker":
            if worker_alive(view):
                os.kill(view.worker_pid, signal.SIGKILL)
                kill.effective, kill.note = True, f"worker harness pid {view.worker_pid}"
            else:
                kill.note = "the worker ended before the signal"
        elif kill.kind == "coordinator":
            pid = self.coordinator.proc.pid
            kill.effective = self.coordinator.kill()
            time.sleep(self.rng.uniform(0.0, 2.0))
            self.coordinator.start()
            kill.note = f"nevis serve pid {pid} killed, a new one ready"
        elif kill.kind == "postgres":
            kill.effective = self.pg.restart(kill.mode)
            kill.note = f"pg_ctl restart -m {kill.mode}" + ("" if kill.effective else " failed")
        log(f"kill {kill.kind}: {kill.target}: {kill.note}")

    def drive(self, kills: list[Kill]) -> None:
        """Perform the kills one after the other, each at the first kill point after the
        ones it lets pass, then wait until every submission ended and no lease is active."""
        deadline = self.started + self.args.timeout
        pending = list(kills)
        passed = 0
        while time.monotonic() < deadline:
            if self.coordinator.proc.poll() is not None:
                raise ChaosError(f"nevis serve died on its own ({self.coordinator.proc.returncode})")
            state = self.progress()
            if state is not None and state[0] == 0 and state[1] == 0:
                break
            found = (
                self.opportunity(pending[0], last_tasks=state[2])
                if pending and state is not None and state[0]
                else None
            )
            if found is None:
                time.sleep(0.2)
                continue
            kill, (view, host) = pending[0], found
            if passed < kill.skip and not state[2]:
                passed += 1  # let this point pass (unless these are the last tasks)
                continue
            time.sleep(kill.delay_s)
            now = self.trials_now(view)
            if now is None or now[0] >= self.args.trials:
                continue  # the task ended, or every trial is in: the point is gone
            if kill.kind == "trial" and (host is None or not in_trial(host)):
                continue
            view.trials, view.ok_trials = now
            self.struck.add(view.lease_id)
            self.strike(kill, view, host)
            pending.pop(0)
            passed = 0
        else:
            raise ChaosError(f"the submissions did not end within {self.args.timeout:.0f} s")
        for kill in pending:
            kill.note = "no kill point left: every submission ended first"

    # the verdict ------------------------------------------------------------------------------

    def check(self) -> None:
        """Count, from the database and the API, what every submission committed."""
        report, db = self.report, Checked(self.db)
        expected = db.rows("""
            SELECT s.id, st.id, st."order" FROM submissions s
            JOIN stream_tasks st ON st.stream_version_id = s.stream_version_id
            WHERE s.phase = 'meta_test' OR st.phase = s.phase""")
        results = Counter(
            (sub, task) for sub, task in db.rows("SELECT submission_id, stream_task_id FROM task_results")
        )
        events = Counter(
            (sub, run)
            for sub, run in db.rows(
                "SELECT e.submission_id, r.stream_task_id FROM events e JOIN task_runs r "
                "ON r.id = CAST(e.payload->>'task_run_id' AS INTEGER) WHERE e.kind = 'task.committed'"
            )
        )
        report.tasks_expected = len(expected)
        report.tasks_committed = sum(1 for sub, task, _ in expected if results[(sub, task)] >= 1)
        report.duplicates = sum(max(0, max(results[(s, t)], events[(s, t)]) - 1) for s, t, _ in expected)
        report.losses = sum(1 for sub, task, _ in expected if results[(sub, task)] == 0)
        statuses = db.rows("SELECT id, status, error FROM submissions ORDER BY id")
        report.submissions = dict(Counter(status for _, status, _ in statuses))
        report.failed = [f"submission {i}: {status}: {error}" for i, status, error in statuses if status != "succeeded"]
        ((attempts, retried_runs),) = db.rows(
            "SELECT count(*), count(*) FILTER (WHERE r.id NOT IN (SELECT task_run_id FROM task_results)) "
            "FROM task_runs r"
        )
        report.attempts, report.retried_attempts = attempts, retried_runs
        report.failed_trials = db.rows("SELECT count(*) FROM trials WHERE status = 'failed'")[0][0]
        # FLOPs: cFLOP is the committed results only; retried work is every trial of an
        # attempt that was not committed, reported apart by the API.
        committed = float(db.rows("SELECT coalesce(sum(flops), 0) FROM task_results")[0][0])
        retried_db = float(
            db.rows(
                "SELECT coalesce(sum(t.flops), 0) FROM trials t JOIN task_runs r ON r.id = t.task_run_id "
                "WHERE r.id NOT IN (SELECT task_run_id FROM task_results)"
            )[0][0]
        )
        mixed = db.rows(
            'SELECT res.submission_id, st."order", res.flops, '
            "(SELECT coalesce(sum(t.flops), 0) FROM trials t WHERE t.task_run_id = res.task_run_id) "
            "FROM task_results res JOIN stream_tasks st ON st.id = res.stream_task_id"
        )
        for sub, order, flops, own in mixed:
            if flops + 1e-6 < own:
                report.flop_problems.append(
                    f"submission {sub} task {order}: committed {flops:.4g} FLOPs < its own trials' {own:.4g}"
                )
        carried = db.rows(
            'SELECT res.submission_id, st."order", r.retried_flops, '
            "(SELECT coalesce(sum(t.flops), 0) FROM trials t JOIN task_runs p ON p.id = t.task_run_id "
            "WHERE p.submission_id = r.submission_id AND p.stream_task_id = r.stream_task_id "
            "AND p.attempt < r.attempt) "
            "FROM task_results res JOIN task_runs r ON r.id = res.task_run_id "
            "JOIN stream_tasks st ON st.id = res.stream_task_id"
        )
        for sub, order, column, earlier in carried:
            if not math.isclose(column, earlier, rel_tol=1e-9, abs_tol=1e-6):
                report.flop_problems.append(
                    f"submission {sub} task {order}: retried_flops {column:.4g} of the committed attempt "
                    f"!= {earlier:.4g}, the trials of its earlier attempts"
                )
        reasons = db.rows(
            "SELECT 'attempt: ' || coalesce(error, status) FROM task_runs "
            "WHERE id NOT IN (SELECT task_run_id FROM task_results) "
            "UNION ALL SELECT 'trial: ' || coalesce(error_text, '?') FROM trials WHERE status = 'failed' "
            "UNION ALL SELECT 'lease ' || status || ': ' || coalesce(error, '') FROM task_leases "
            "WHERE status NOT IN ('succeeded')"
        )
        report.failure_reasons = dict(Counter(" ".join(ANSI.sub("", r).split())[:160] for (r,) in reasons))
        api_cflop = api_retried = 0.0
        for sub in self.submissions:
            body = self._api("GET", f"/v1/submissions/{sub}").json()
            api_cflop += float(body["cflop"] or 0.0)
            api_retried += float(body["retried_flops"] or 0.0)
        report.cflop, report.retried_flops, report.retried_flops_db = committed, api_retried, retried_db
        if not math.isclose(api_cflop, committed, rel_tol=1e-9, abs_tol=1e-6):
            report.flop_problems.append(f"API cFLOP {api_cflop:.6g} != committed results {committed:.6g}")
        if not math.isclose(api_retried, retried_db, rel_tol=1e-9, abs_tol=1e-6):
            report.flop_problems.append(
                f"API retried_flops {api_retried:.6g} != trials of uncommitted attempts {retried_db:.6g}"
            )

    def tally(self, kills: list[Kill]) -> None:
        report = self.report
        report.kills = {
            kind: {
                "planned": sum(k.kind == kind for k in kills),
                "attempted": sum(k.kind == kind and k.attempted for k in kills),
                "effective": sum(k.kind == kind and k.effective for k in kills),
            }
            for kind in KINDS
        }
        report.kill_log = [asdict(k) for k in kills]
        report.coordinator_starts = self.coordinator.starts if self.coordinator else 0
        report.postgres_restarts = self.pg.restarts
        report.wall_s = round(time.monotonic() - self.started, 1)

    def run(self) -> Report:
        kills = plan_kills(self.rng, {kind: self.args.kills for kind in KINDS if kind != "node"})
        if self.args.node_kills:
            from chaos_nodes import node_kill_plan

            kills = node_kill_plan(self.args.node_kills)
        try:
            self.setup()
            self.submit()
            self.drive(kills)
            self.check()
        except ChaosError as exc:
            self.report.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug here must still end in a report
            self.report.error = "".join(traceback.format_exception(exc))[-4000:]
        finally:
            self.tally(kills)
        return self.report


def render(report: Report) -> str:
    """The report as the lines the script prints."""
    lines = [f"N = {report.runs} submissions of {report.phase} on {report.stream} (seed {report.seed})"]
    for kind in KINDS:
        k = report.kills.get(kind, {"planned": 0, "attempted": 0, "effective": 0})
        lines.append(f"kills {kind:<12} planned {k['planned']}  attempted {k['attempted']}  effective {k['effective']}")
    lines += [
        f"coordinator starts {report.coordinator_starts}, postgres restarts {report.postgres_restarts}",
        f"tasks committed {report.tasks_committed} / {report.tasks_expected}",
        f"duplicates {report.duplicates}",
        f"losses {report.losses}",
        f"submissions {report.submissions}",
        f"attempts {report.attempts} (not committed: {report.retried_attempts}), failed trials {report.failed_trials}",
        f"cFLOP {report.cflop:.6e}",
        f"retried FLOPs {report.retried_flops:.6e} (API; trials of uncommitted attempts in the database "
        f"{report.retried_flops_db:.6e})",
        f"wall time {report.wall_s:.1f} s",
        "why attempts did not commit, trials failed and leases did not succeed (count x reason):",
    ]
    lines += [f"  {count} x {reason}" for reason, count in sorted(report.failure_reasons.items())]
    lines += [f"kill not made: {k['kind']} ({k['note']})" for k in report.kill_log if not k["attempted"]]
    lines += [
        f"kill made: at {k['at_s']} s, {k['kind']}: {k['target']}: {k['note']}"
        for k in report.kill_log
        if k["attempted"]
    ]
    lines += [f"FAILED: {line}" for line in report.failed]
    lines += [f"FLOPs: {line}" for line in report.flop_problems]
    if report.error:
        lines.append(f"ERROR: {report.error}")
    lines.append("verdict: " + ("OK" if report.ok else "NOT OK"))
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/chaos.py",
        description="\n\n".join(__doc__.split("\n\n")[:2]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit status: 0 all tasks committed exactly once and FLOPs accounted; 1 a loss, "
        "duplicate, failed submission or FLOP mismatch; 2 the chaos run broke down.",
    )
    parser.add_argument("--runs", "-n", type=int, default=4, help="submissions (N), default 4")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill plan, default 0")
    parser.add_argument("--kills", type=int, default=None, help="kills of each kind (default: ceil(N / 2))")
    parser.add_argument(
        "--phase",
        choices=("meta_train", "meta_test"),
        default="meta_train",
        help="meta_train: mini's 3 first tasks (default); meta_test: all 5",
    )
    parser.add_argument("--stream", default="mini", help="a stream the coordinator offers, default mini")
    parser.add_argument("--trials", type=int, default=3, help="trials per task, default 3 (at least 2)")
    parser.add_argument("--slots", type=int, default=2, help="NEVIS_SCHEDULER_SLOTS, default 2")
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=None,
        help="NEVIS_MAX_ATTEMPTS (default: enough for every kill to hit one task)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds to wait for every submission to end, default 1800"
    )
    parser.add_argument(
        "--pg-bin",
        type=Path,
        default=None,
        help="PostgreSQL server binaries (default: newest /usr/lib/postgresql/*/bin)",
    )
    parser.add_argument(
        "--node-kills",
        type=int,
        default=0,
        help="kill the learner node's raylet this many times, on the ray backend and a two-node cluster "
        "(bench/chaos_nodes.py); the other kinds are then not made (their kill points are the local backend's)",
    )
    parser.add_argument(
        "--node-down-s", type=float, default=5.0, help="seconds before a new learner node joins, default 5"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.slots < 1:
        parser.error("--runs and --slots must be at least 1")
    if args.trials < 2:
        parser.error("--trials must be at least 2 (a kill point needs a trial recorded and one to come)")
    args.kills = math.ceil(args.runs / 2) if args.kills is None else args.kills
    if args.node_kills < 0:
        parser.error("--node-kills must be at least 0")
    if args.node_kills:
        args.kills = 0
    if args.kills < 0:
        parser.error("--kills must be at least 0")
    args.max_attempts = args.max_attempts or 2 + 4 * max(args.kills, args.node_kills)
    args.pg_bin = args.pg_bin or default_pg_bin()
    return args


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the clean-up like Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    root = Path(tempfile.mkdtemp(prefix="nevis-chaos-"))
    os.chmod(root, 0o755)  # the postgres user must reach its cluster's folder
    with ExitStack() as stack:
        if not args.keep:
            stack.callback(shutil.rmtree, root, ignore_errors=True)
        try:
            if args.node_kills:
                sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: the cluster
                from chaos_nodes import NodeChaos

                chaos = NodeChaos(args, root, stack)
            else:
                chaos = Chaos(args, root, stack)
            stack.callback(kill_marked, chaos.marker)
            report = chaos.run()
        except KeyboardInterrupt:
            log("interrupted; cleaning up")
            return 130
    print(render(report), flush=True)
    if args.keep:
        print(f"kept: {root}")
    if args.json is not None:
        args.json.write_text(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    if report.error is not None:
        return 2
    return 0 if report.ok else 1


__all__ = ["KINDS", "ChaosError", "Kill", "Report", "main", "parse_args", "plan_kills", "render"]


if __name__ == "__main__":
    sys.exit(main())
