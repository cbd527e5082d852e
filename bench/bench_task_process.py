"""What a task costs the coordinator's way: a worker process per task, or workers that go on.

``bench/bench_stream.py`` measures ``nevis run``, one process that keeps its Ray actors and
learner hosts warm from task to task. The coordinator starts ``nevis worker run-task`` per
launch (each task has a lease that can fail, be retried or be reaped on its own); with a
process per task (``NEVIS_WORKER_MAX_TASKS=1``) every task pays a cold start: the process and its imports, Ray (a local cluster on a
laptop, a connection on a cluster), the run's actors and their sandboxed learner hosts, the
task's data. This script runs ``mini``'s tasks that way, each in a new process doing what the
worker does after its lease bookkeeping (``StreamRunner(...).run_next_task``, the lease's
end, then ``ray.shutdown``), and prints per task: the process's wall time to its lease's end
(where the scheduler may launch the next task) and to its exit, its trials' training time (as
the hosts measured it), and the rest up to the lease's end, the per-task tax; both with a local Ray cluster per
process (the local backend's default) and connected to a Ray cluster started once (as on
KubeRay). The figures feed ``bench/paper_scale.py``'s ``--orchestration-s``.

The ``coordinator`` mode runs the real path instead: the scheduler launching ``nevis worker
run-task`` through the ``local`` backend on one Ray cluster, once with a process per task
(``NEVIS_WORKER_MAX_TASKS=1``) and once with workers that go on with the submission's next
task (the default), and prints per task the time from the previous lease's end to its own
(launch delay, process start and the task itself), its training and the rest.

Usage: ``python bench/bench_task_process.py [--trials 4] [--steps 200] [--modes local,shared,coordinator] [--json out.json]``.
Wall time on this machine; run it on a quiet one (it takes a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STREAM, LEARNER = "mini", "indep_small"


def fresh_data_dir() -> dict[str, str]:
    """The environment of a new data folder (SQLite database and store), as bench_stream's."""
    env = {k: v for k, v in os.environ.items() if k not in ("NEVIS_DATABASE_URL", "NEVIS_STORE_URL", "RAY_ADDRESS")}
    env["NEVIS_DATA_DIR"] = tempfile.mkdtemp(prefix="nevis-bench-task-")
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if shared.is_dir():
        env.setdefault("NEVIS_OFFLINE_DATA_DIR", str(shared))
    return env


def create_submission(env: dict[str, str], trials: int, steps: int) -> int:
    """A submission of ``mini`` with its data prepared (not timed), created in a child process."""
    code = (
        "from services.core.budget import RunBudget\n"
        "from services.core.config import get_settings\n"
        "from services.store.db import upgrade\n"
        "from workers.trainer.run_plan import RunRequest\n"
        "from workers.trainer.stream_runner import StreamRunner\n"
        "s = get_settings(); upgrade(s.database_url)\n"
        f"budget = RunBudget(trials={trials}, steps={steps}, max_concurrent=1)\n"
        f"print(StreamRunner(s).create(RunRequest(stream={STREAM!r}, learner={LEARNER!r}, budget=budget)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


TASK_CODE = """
import time, sys
started = time.perf_counter()
from services.core.config import get_settings
from workers.trainer.stream_runner import StreamRunner
import ray
StreamRunner(get_settings()).run_next_task(int(sys.argv[1]))
at_lease_end = time.perf_counter() - started  # where the worker ends its lease
ray.shutdown()
print(at_lease_end, time.perf_counter() - started)
"""


def run_tasks(env: dict[str, str], submission: int, count: int) -> tuple[list[float], list[float]]:
    """Each task in a new process, one after another: the seconds from the process's start (the
    interpreter's own start-up included) to its lease's end, where the scheduler may launch the
    next task (the commit), and to its exit (after ``ray.shutdown``)."""
    to_lease_end, to_exit = [], []
    for _ in range(count):
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", TASK_CODE, str(submission)], env=env, check=True, stdout=subprocess.PIPE, text=True
        )
        to_exit.append(time.perf_counter() - started)
        at_lease_end, after_shutdown = map(float, out.stdout.strip().splitlines()[-1].split())
        to_lease_end.append(to_exit[-1] - (after_shutdown - at_lease_end))
    return to_lease_end, to_exit


def trial_seconds(env: dict[str, str], submission: int) -> dict[int, float]:
    """task order -> the seconds its trials trained, as the learner hosts measured them."""
    code = (
        "import json\n"
        "from sqlalchemy import func, select\n"
        "from services.core.config import get_settings\n"
        "from services.store.db import sessions_on\n"
        "from services.store.db.models import StreamTask, TaskRun, Trial\n"
        "s = sessions_on(get_settings().database_url)()\n"
        "rows = s.execute(select(StreamTask.order, func.sum(Trial.wall_time_s))"
        ".join(TaskRun, Trial.task_run_id == TaskRun.id).join(StreamTask, TaskRun.stream_task_id == StreamTask.id)"
        f".where(TaskRun.submission_id == {submission}).group_by(StreamTask.order)).all()\n"
        "print(json.dumps({int(o): float(w or 0) for o, w in rows}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def measure(label: str, env: dict[str, str], trials: int, steps: int) -> dict[str, Any]:
    submission = create_submission(env, trials, steps)
    walls, exits = run_tasks(env, submission, count=5)
    trained = [w for _, w in sorted(trial_seconds(env, submission).items())]
    tax = [w - t for w, t in zip(walls, trained, strict=True)]
    print(f"{label}:")
    for order, (wall, end, train, extra) in enumerate(zip(walls, exits, trained, tax, strict=True), start=1):
        print(
            f"  task {order}: process start to lease end {wall:6.1f} s (to exit {end:5.1f} s), "
            f"trials trained {train:6.1f} s, the rest {extra:5.1f} s"
        )
    print(
        f"  per-task tax (to the lease's end, where the next task may launch), median "
        f"{statistics.median(tax):.1f} s (mean {statistics.mean(tax):.1f} s)"
    )
    return {
        "to_lease_end_s": walls,
        "to_exit_s": exits,
        "trained_s": trained,
        "tax_s": tax,
        "median_tax_s": statistics.median(tax),
    }


COORDINATOR_CODE = """
import json, sys, time
from sqlalchemy import select
from services.coordinator.backends.local import LocalBackend
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users
from services.coordinator.scheduler.loop import Scheduler
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, sessions_on, transaction, upgrade
from services.store.db.models import Submission
from services.store.db.models_coordinator import ScheduledSubmission, TaskLease
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner
trials, steps, max_tasks = map(int, sys.argv[1:4])
settings = CoordinatorSettings(worker_max_tasks=max_tasks, poll_interval_s=0.2)
upgrade(settings.database_url)
budget = RunBudget(trials=trials, steps=steps, max_concurrent=1)
sub = StreamRunner(settings).create(RunRequest(stream=STREAM, learner=LEARNER, budget=budget))  # data ready
sessions = sessions_on(settings.database_url)
with transaction(sessions) as session:
    user = users.create_user(session, name="bench", role="submitter", max_concurrent=10)
    session.add(ScheduledSubmission(submission_id=sub, user_id=user.id))
scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
while True:
    scheduler.tick()
    with sessions() as session:  # the last commit ends the run; then its worker ends the lease
        if (session.get(Submission, sub).status not in ("queued", "running")
                and session.get(ScheduledSubmission, sub).active_lease_id is None):
            break
    time.sleep(0.05)
with sessions() as session:
    status = session.get(Submission, sub).status
    rows = session.execute(select(TaskLease.task_order, TaskLease.status, TaskLease.job_id,
                                  TaskLease.created_at, TaskLease.finished_at).order_by(TaskLease.id)).all()
print(json.dumps({"submission": sub, "status": status, "leases": [
    [r.task_order, r.status, r.job_id, r.created_at.timestamp(), r.finished_at.timestamp()] for r in rows]}))
"""


def through_the_coordinator(label: str, env: dict[str, str], trials: int, steps: int, max_tasks: int) -> dict[str, Any]:
    """The real path: the scheduler (polling every 0.2 s) launches ``nevis worker run-task``
    processes through the ``local`` backend, and a worker may go on with the next tasks
    (``NEVIS_WORKER_MAX_TASKS``). A task's wall time runs from the previous lease's end (the
    first: its lease's claim) to its own lease's end; the tax is that less its trials' training."""
    code = f"STREAM, LEARNER = {STREAM!r}, {LEARNER!r}\n" + COORDINATOR_CODE
    out = subprocess.run(
        [sys.executable, "-c", code, str(trials), str(steps), str(max_tasks)],
        env=env,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    run = json.loads(out.stdout.strip().splitlines()[-1])
    assert run["status"] == "succeeded", run
    leases = run["leases"]
    ends = [leases[0][3]] + [lease[4] for lease in leases]
    walls = [b - a for a, b in zip(ends, ends[1:])]
    trained = [w for _, w in sorted(trial_seconds(env, run["submission"]).items())]
    tax = [w - t for w, t in zip(walls, trained, strict=True)]
    processes = len({lease[2] for lease in leases})
    print(f"{label}: {len(leases)} tasks in {processes} worker process(es)")
    for order, (wall, train, extra) in enumerate(zip(walls, trained, tax, strict=True), start=1):
        print(
            f"  task {order}: previous lease's end to this lease's end {wall:6.1f} s, "
            f"trials trained {train:6.1f} s, the rest {extra:5.1f} s"
        )
    print(
        f"  per-task tax median {statistics.median(tax):.1f} s, after the first task median "
        f"{statistics.median(tax[1:]):.1f} s, whole run {sum(walls):.1f} s",
        flush=True,
    )
    return {
        "wall_s": walls,
        "trained_s": trained,
        "tax_s": tax,
        "processes": processes,
        "median_tax_s": statistics.median(tax),
        "median_tax_after_first_s": statistics.median(tax[1:]),
        "run_s": sum(walls),
    }


def start_cluster(env: dict[str, str]) -> str:
    """A Ray head on a free port (6379, Ray's default, may be taken: Redis); its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    subprocess.run(
        [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    return f"127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--modes",
        default="local,shared,coordinator",
        help="which to run: local (a Ray cluster per task), shared (one cluster), "
        "coordinator (the scheduler and real workers on one cluster, a process per "
        "task against workers that go on)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    modes = set(args.modes.split(","))
    print(f"{STREAM}, {LEARNER}, {args.trials} trials x {args.steps} steps per task, one process per task", flush=True)
    figures: dict[str, Any] = {"trials": args.trials, "steps": args.steps}
    if "local" in modes:
        figures["local_cluster_per_task"] = measure(
            "a local Ray cluster per task (the local backend's default)", fresh_data_dir(), args.trials, args.steps
        )
    if "shared" in modes:
        env = {**fresh_data_dir(), "RAY_AUTH_MODE": "disabled"}  # as the repository's tests connect
        address = start_cluster(env)
        try:
            figures["shared_cluster"] = measure(
                "connected to a Ray cluster started once (NEVIS_RAY_ADDRESS; as on KubeRay)",
                {**env, "RAY_ADDRESS": address},
                args.trials,
                args.steps,
            )
        finally:
            subprocess.run(
                [str(Path(sys.executable).parent / "ray"), "stop", "--force"], capture_output=True, check=False
            )
    if "coordinator" in modes:
        env = {**fresh_data_dir(), "RAY_AUTH_MODE": "disabled"}
        address = start_cluster(env)
        try:
            for max_tasks, label in (
                (1, "the coordinator, a worker process per task (NEVIS_WORKER_MAX_TASKS=1)"),
                (16, "the coordinator, workers that go on (NEVIS_WORKER_MAX_TASKS=16)"),
            ):
                run_env = {**fresh_data_dir(), "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": address}
                figures[f"coordinator_max_tasks_{max_tasks}"] = through_the_coordinator(
                    label, run_env, args.trials, args.steps, max_tasks
                )
        finally:
            subprocess.run(
                [str(Path(sys.executable).parent / "ray"), "stop", "--force"], capture_output=True, check=False
            )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    sys.exit(main())
