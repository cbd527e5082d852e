"""The ``local`` backend: one worker process per launch on this machine (it may go on with
its submission's next tasks: :mod:`services.coordinator.scheduler.continuation`).

The worker (``nevis worker run-task``; unless ``NEVIS_WORKER_COMMAND`` says else, run as
``python -m services.cli`` by the server's own interpreter, so no ``nevis`` on ``PATH`` is
needed) connects to the local Ray instance named by ``NEVIS_RAY_ADDRESS`` or starts its
own, and loads the learner from an installed entry point
or its uploaded bundle. Each worker gets its own process group, so a cancellation stops it
and every process it started, and a coordinator restart leaves it running (its heartbeats
keep its lease alive). A job id is ``local:<pid>:<start time>``: the start time (from
``/proc``) guards against a recycled pid when a later coordinator process looks it up.
Ended workers are waited on (:meth:`LocalBackend.reap`, on every scheduler pass, launch and
status call), so none stays a zombie under the server.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec, worker_env
from services.coordinator.common.config import CoordinatorSettings
from services.core.errors import ConfigError

STOP_GRACE_S = 5.0
MAX_UNREAD_EXITS = 10_000  # exit codes of reaped workers kept for status()


class LocalBackend:
    """Worker subprocesses of this coordinator process."""

    name = "local"

    def __init__(self, settings: CoordinatorSettings) -> None:
        self.settings = settings
        self.log_dir = settings.data_dir / "logs" / "workers"
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._exits: dict[str, int] = {}  # job id -> exit code of a reaped worker, until read
        self._job_ids: dict[int, str] = {}

    def worker_command(self) -> list[str]:
        """``NEVIS_WORKER_COMMAND`` if set, else this installation's own ``nevis``."""
        if self.settings.worker_command:
            return shlex.split(self.settings.worker_command)
        if sys.executable:
            return [sys.executable, "-m", "services.cli"]
        return ["nevis"]

    def launch(self, spec: LaunchSpec) -> str:
        self.reap()
        argv = [*self.worker_command(), *spec.worker_args()]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path(spec.job_name)
        with open(log_path, "ab") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    env={**os.environ, **worker_env(self.settings)},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ConfigError(
                    f"Cannot start the worker command {argv[0]!r} ({exc}); set "
                    "NEVIS_WORKER_COMMAND to the nevis command of this installation, or "
                    "unset it to use the server's own."
                ) from None
        job_id = f"local:{proc.pid}:{start_ticks(proc.pid)}"
        self._children[proc.pid] = proc
        self._job_ids[proc.pid] = job_id
        return job_id

    def reap(self) -> list[str]:
        """Wait on every worker that has ended (no zombies); :meth:`status` still reads its
        exit code. Returns the job ids reaped now."""
        reaped = []
        for pid, proc in list(self._children.items()):
            code = proc.poll()
            if code is None:
                continue
            # What the worker left in its group (a killed harness's Ray agents) is orphaned:
            # stop it now. Safe: a pid still in use as a group id is never handed out again.
            _signal_group(pid, signal.SIGKILL)
            self._children.pop(pid, None)
            job_id = self._job_ids.pop(pid, None)
            if job_id is not None:
                self._exits[job_id] = code
                reaped.append(job_id)
        while len(self._exits) > MAX_UNREAD_EXITS:
            self._exits.pop(next(iter(self._exits)))
        return reaped

    def log_path(self, job_name: str) -> Path:
        return self.log_dir / f"{job_name}.log"

    def status(self, job_id: str) -> JobStatus:
        pid, ticks = parse_job_id(job_id)
        self.reap()
        if self._job_ids.get(pid) == job_id:  # a child of ours that has not ended
            return JobStatus(JobState.RUNNING)
        code = self._exits.pop(job_id, None)
        if code is not None:
            state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            return JobStatus(state, f"worker exit code {code}")
        if ticks and start_ticks(pid) == ticks:
            return JobStatus(JobState.RUNNING, "started by an earlier coordinator process")
        return JobStatus(JobState.FAILED, "the worker process is gone (exit code unknown)")

    def cancel(self, job_id: str) -> None:
        pid, ticks = parse_job_id(job_id)
        proc = self._children.get(pid) if self._job_ids.get(pid) == job_id else None
        if job_id in self._exits:
            return  # reaped already
        if proc is None and (not ticks or start_ticks(pid) != ticks):
            return  # ended already, or the pid now belongs to someone else
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                break
            if proc is None and start_ticks(pid) != ticks:
                break
            time.sleep(0.1)
        _signal_group(pid, signal.SIGKILL)
        if proc is not None:
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is not None:
                self._children.pop(pid, None)
                self._job_ids.pop(pid, None)


def parse_job_id(job_id: str) -> tuple[int, str]:
    parts = job_id.split(":")
    if len(parts) != 3 or parts[0] != "local" or not parts[1].isdigit():
        raise ValueError(f"Not a local job id: {job_id!r} (expected local:<pid>:<start>).")
    return int(parts[1]), parts[2]


def start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' if unknown or gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) > 19 and fields[0] != "Z":  # a zombie has ended
        return fields[19]
    return ""


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["MAX_UNREAD_EXITS", "STOP_GRACE_S", "LocalBackend", "parse_job_id", "start_ticks"]
