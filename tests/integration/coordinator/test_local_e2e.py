"""End to end on the ``local`` backend: ``nevis serve`` killed mid-stream, started again, and
the submission finishes with every task counted once.

The coordinator runs as a real server process (uvicorn) with its scheduler; workers are
``nevis worker run-task`` processes that join a real Ray head; the learner is uploaded as a
source bundle (it is on no import path of the server, the workers or the Ray head). The
server and the worker running task 2 are killed with SIGKILL; a new server reaps the dead
lease and relaunches task 2.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``nevis serve`` in its own process group, logging to a file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [env["NEVIS_WORKER_COMMAND"], "serve", "--port", str(self.port), "--log-level", "warning"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, kit) -> None:
        def ready():
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited:\n{self.log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        kit.wait_for(ready, timeout_s=60, what="the server to be ready")

    def kill(self) -> None:
        _kill_group(self.proc.pid)
        self.proc.wait(timeout=30)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_server_killed_mid_stream_resumes_and_counts_every_task_once(coord_settings, ray_head, kit, tmp_path):
    url = coord_settings.database_url
    env = {
        **os.environ,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
        "NEVIS_DATABASE_URL": url,
        "NEVIS_STREAMS_DIR": str(coord_settings.streams_dir),
        "NEVIS_RAY_ADDRESS": ray_head.gcs_address,
        "NEVIS_WORKER_COMMAND": str(kit.nevis),
        "NEVIS_HEARTBEAT_INTERVAL_S": "1",
        "NEVIS_HEARTBEAT_TIMEOUT_S": "10",
        "NEVIS_POLL_INTERVAL_S": "0.3",
        "NEVIS_BACKOFF_BASE_S": "0.5",
        "NEVIS_BACKOFF_MAX_S": "2",
        "RAY_AUTH_MODE": "disabled",
    }
    for name in ("PYTHONPATH", "RAY_ADDRESS", "NEVIS_STORE_URL", "NEVIS_BACKEND"):
        env.pop(name, None)
    token = kit.add_user(url, "alice", "submitter")
    headers = {"Authorization": f"Bearer {token}"}
    first = Server(env, tmp_path / "server-1.log")
    workers: list[int] = []
    try:
        first.wait_ready(kit)
        bundle = kit.learner_bundle(tmp_path)
        with open(bundle, "rb") as handle:
            learner = httpx.post(
                f"{first.url}/v1/learners/bundle",
                headers=headers,
                timeout=30,
                data={"name": "slow-nm", "entrypoint": "nevis_test_learners:slow"},
                files={"file": (bundle.name, handle, "application/gzip")},
            )
        assert learner.status_code == 201, learner.text
        created = httpx.post(
            f"{first.url}/v1/submissions",
            headers=headers,
            timeout=30,
            json={
                "learner_id": learner.json()["id"],
                "stream": "tiny3",
                "budget": {"trials": 1, "steps": 1, "max_concurrent": 1},
            },
        )
        assert created.status_code == 201, created.text
        sub_id = created.json()["id"]

        # Task 1 committed, and task 2's run has started in a worker: kill everything.
        kit.wait_for(
            lambda: kit.query(
                url,
                'SELECT count(*) FROM task_runs r JOIN stream_tasks s ON s.id = r.stream_task_id WHERE s."order" = 2',
            )[0][0],
            timeout_s=400,
            what="task 2 to start",
            interval_s=0.3,
        )
        (job_id,) = kit.query(url, "SELECT job_id FROM task_leases WHERE task_order = 2")[0]
        first.kill()
        workers.append(int(job_id.split(":")[1]))
        _kill_group(workers[-1])
        assert kit.query(url, "SELECT count(*) FROM task_results")[0][0] == 1
        assert kit.query(url, "SELECT status FROM submissions")[0][0] == "running"

        second = Server(env, tmp_path / "server-2.log")
        try:
            second.wait_ready(kit)

            def finished():
                body = httpx.get(f"{second.url}/v1/submissions/{sub_id}", headers=headers, timeout=10).json()
                done = body["status"] not in ("queued", "running") and body["current_task"] is None
                return body if done else None

            body = kit.wait_for(finished, timeout_s=500, what="the submission to finish", interval_s=1)
            events = httpx.get(
                f"{second.url}/v1/submissions/{sub_id}/events?limit=500", headers=headers, timeout=10
            ).json()["items"]
        finally:
            second.proc.send_signal(signal.SIGTERM)
            second.proc.wait(timeout=60)
    finally:
        first.kill()
        for (job,) in kit.query(url, "SELECT job_id FROM task_leases WHERE job_id IS NOT NULL"):
            _kill_group(int(job.split(":")[1]))

    assert body["status"] == "succeeded", body
    assert [t["status"] for t in body["tasks"]] == ["committed"] * 3
    per_task = kit.query(
        url,
        'SELECT s."order", count(*) FROM task_results r JOIN stream_tasks s '
        'ON s.id = r.stream_task_id GROUP BY s."order" ORDER BY 1',
    )
    assert per_task == [(1, 1), (2, 1), (3, 1)]
    attempts = kit.query(
        url,
        'SELECT s."order", r.attempt, r.status FROM task_runs r JOIN stream_tasks s '
        "ON s.id = r.stream_task_id ORDER BY 1, 2",
    )
    assert attempts == [(1, 1, "succeeded"), (2, 1, "failed"), (2, 2, "succeeded"), (3, 1, "succeeded")]
    leases = kit.query(url, "SELECT task_order, attempt, status FROM task_leases ORDER BY id")
    assert leases == [(1, 1, "succeeded"), (2, 1, "expired"), (2, 2, "succeeded"), (3, 1, "succeeded")]
    # each worker went on with the next task in its own process (NEVIS_WORKER_MAX_TASKS), the
    # killed one included: two launches for four leases
    jobs = [job for (job,) in kit.query(url, "SELECT job_id FROM task_leases ORDER BY id")]
    assert jobs[0] == jobs[1] != jobs[2] == jobs[3]
    continued = [e["payload"].get("continues") for e in events if e["kind"] == "lease.claimed"]
    assert [c is not None for c in continued] == [False, True, False, True]
    committed = kit.query(url, "SELECT sum(flops) FROM task_results")[0][0]
    meta_test_error = kit.query(
        url,
        "SELECT r.error FROM task_results r JOIN stream_tasks s ON s.id = r.stream_task_id WHERE s.phase = 'meta_test'",
    )[0][0]
    assert body["cflop"] == pytest.approx(committed) and committed > 0
    assert body["e"] == pytest.approx(meta_test_error)
    assert body["scored_tasks"] == body["headline_tasks"] == 1
    kinds = [e["kind"] for e in events]
    assert "lease.expired" in kinds and kinds.count("task.committed") == 3
