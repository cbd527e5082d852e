"""The local backend with real processes (no worker: stand-in commands)."""

from __future__ import annotations

import time
from pathlib import Path

from services.coordinator.backends.base import JobState, LaunchSpec
from services.coordinator.backends.local import LocalBackend, start_ticks
from services.coordinator.common.config import CoordinatorSettings

SPEC = LaunchSpec(lease_id=5, submission_id=2, task_order=1, attempt=1, learner_name="x", entrypoint="m:f", image=None)


def _backend(tmp_path, command: str) -> LocalBackend:
    return LocalBackend(
        CoordinatorSettings(data_dir=tmp_path, database_url="sqlite://", worker_command=command, heartbeat_interval_s=2)
    )


def _live_members(group: int) -> list[int]:
    """Processes of a process group that have not ended (zombies excluded)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _wait_ended(backend, job_id):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = backend.status(job_id)
        if status.state.ended:
            return status
        time.sleep(0.05)
    raise AssertionError("the process did not end")


def test_the_worker_gets_its_arguments_and_settings_and_logs_to_a_file(tmp_path):
    backend = _backend(tmp_path, "sh -c 'echo \"$* hb=$NEVIS_HEARTBEAT_INTERVAL_S\"; exit 3' sh")
    job_id = backend.launch(SPEC)
    status = _wait_ended(backend, job_id)
    assert status.state is JobState.FAILED and "exit code 3" in status.message
    log = backend.log_path(SPEC.job_name).read_text()
    assert "worker run-task --submission 2 --lease 5 hb=2.0" in log


def test_a_clean_exit_reads_as_succeeded(tmp_path):
    backend = _backend(tmp_path, "true")
    assert _wait_ended(backend, backend.launch(SPEC)).state is JobState.SUCCEEDED


def test_cancel_stops_the_whole_process_group(tmp_path):
    backend = _backend(tmp_path, "sh -c 'sleep 60 & sleep 60' sh")
    job_id = backend.launch(SPEC)
    pid = int(job_id.split(":")[1])
    assert backend.status(job_id).state is JobState.RUNNING
    deadline = time.monotonic() + 10
    while len(_live_members(pid)) < 3 and time.monotonic() < deadline:  # sh and both sleeps
        time.sleep(0.05)
    assert len(_live_members(pid)) == 3
    backend.cancel(job_id)
    assert start_ticks(pid) == "" and backend.status(job_id).state.ended
    # A SIGKILLed grandchild leaves /proc once the kernel has torn it down; allow it a moment.
    deadline = time.monotonic() + 5
    while _live_members(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_members(pid) == []
    backend.cancel(job_id)  # twice is fine


def test_what_an_ended_worker_left_in_its_group_is_stopped_when_it_is_reaped(tmp_path):
    backend = _backend(tmp_path, "sh -c 'sleep 60 & echo started; exit 0' sh")
    job_id = backend.launch(SPEC)
    pid = int(job_id.split(":")[1])
    deadline = time.monotonic() + 10
    while pid in _live_members(pid) and time.monotonic() < deadline:  # the leader exits (a zombie)
        time.sleep(0.05)
    assert pid not in _live_members(pid) and _live_members(pid), "the orphaned sleep runs on"
    assert backend.reap() == [job_id]
    deadline = time.monotonic() + 5
    while _live_members(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_members(pid) == []
