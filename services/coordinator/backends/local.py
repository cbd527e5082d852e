"""The ``local`` backend: one worker process per task on this machine.

The worker (``nevis worker run-task``) connects to the local Ray instance named by
``NEVIS_RAY_ADDRESS`` or starts its own, and loads the learner from an installed entry point
or its uploaded bundle. Each worker gets its own process group, so a cancellation stops it
and every process it started, and a coordinator restart leaves it running (its heartbeats
keep its lease alive). A job id is ``local:<pid>:<start time>``: the start time (from
``/proc``) guards against a recycled pid when a later coordinator process looks it up.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec, worker_env
from services.coordinator.core.config import CoordinatorSettings
from services.core.errors import ConfigError

STOP_GRACE_S = 5.0


class LocalBackend:
    """Worker subprocesses of this coordinator process."""

    name = "local"

    def __init__(self, settings: CoordinatorSettings) -> None:
        self.settings = settings
        self.log_dir = settings.data_dir / "logs" / "workers"
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def launch(self, spec: LaunchSpec) -> str:
        argv = [*shlex.split(self.settings.worker_command), *spec.worker_args()]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path(spec.job_name)
        with open(log_path, "ab") as log:
            try:
                proc = subprocess.Popen(
                    argv, env={**os.environ, **worker_env(self.settings)}, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise ConfigError(
                    f"Cannot start the worker command {argv[0]!r} ({exc}); set "
                    "NEVIS_WORKER_COMMAND to the nevis command of this installation.") from None
        self._children[proc.pid] = proc
        return f"local:{proc.pid}:{_start_ticks(proc.pid)}"

    def log_path(self, job_name: str) -> Path:
        return self.log_dir / f"{job_name}.log"

    def status(self, job_id: str) -> JobStatus:
        pid, ticks = _parse(job_id)
        proc = self._children.get(pid)
        if proc is not None:
            code = proc.poll()
            if code is None:
                return JobStatus(JobState.RUNNING)
            self._children.pop(pid, None)
            state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            return JobStatus(state, f"worker exit code {code}")
        if ticks and _start_ticks(pid) == ticks:
            return JobStatus(JobState.RUNNING, "started by an earlier coordinator process")
        return JobStatus(JobState.FAILED, "the worker process is gone (exit code unknown)")

    def cancel(self, job_id: str) -> None:
        pid, ticks = _parse(job_id)
        proc = self._children.get(pid)
        if proc is None and (not ticks or _start_ticks(pid) != ticks):
            return  # ended already, or the pid now belongs to someone else
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                break
            if proc is None and _start_ticks(pid) != ticks:
                break
            time.sleep(0.1)
        _signal_group(pid, signal.SIGKILL)
        if proc is not None:
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            self._children.pop(pid, None)


def _parse(job_id: str) -> tuple[int, str]:
    parts = job_id.split(":")
    if len(parts) != 3 or parts[0] != "local" or not parts[1].isdigit():
        raise ValueError(f"Not a local job id: {job_id!r} (expected local:<pid>:<start>).")
    return int(parts[1]), parts[2]


def _start_ticks(pid: int) -> str:
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
