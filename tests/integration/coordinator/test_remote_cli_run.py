"""``nevis submit`` follows a real run to its end: a ``nevis serve`` with its scheduler, workers
on a real Ray head (as test_local_e2e.py), a learner folder uploaded by the client, the run
followed with ``nevis run``'s bars until it succeeds, then read on the leaderboard.

PostgreSQL only, like test_local_e2e.py: the server, the workers and the test write at once.
The learner is the numpy nearest-mean test learner, 1 trial of 1 step per task of ``tiny2``;
then a learner that raises in ``train`` fails on its first task, and its traceback is read back
with ``nevis logs`` and on the dashboard's submission page, by its owner only (issue 25, logs).
"""

from __future__ import annotations

import os
import re
import shutil
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


def test_submit_follows_a_real_run_to_the_leaderboard(coord_settings, ray_head, kit, tmp_path: Path) -> None:
    url = coord_settings.database_url
    env = {
        **os.environ,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
        "NEVIS_DATABASE_URL": url,
        "NEVIS_STREAMS_DIR": str(coord_settings.streams_dir),
        "NEVIS_RAY_ADDRESS": ray_head.gcs_address,
        "NEVIS_WORKER_COMMAND": str(kit.nevis),
        "NEVIS_HEARTBEAT_INTERVAL_S": "1",
        "NEVIS_POLL_INTERVAL_S": "0.3",
        "RAY_AUTH_MODE": "disabled",
        # One launch per task: the crasher's task fails at its first attempt instead of
        # two more launches after 10 s and 20 s of back-off (retries are test_scheduler's).
        "NEVIS_MAX_ATTEMPTS": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "200",
    }
    for name in ("PYTHONPATH", "RAY_ADDRESS", "NEVIS_STORE_URL", "NEVIS_BACKEND", "NEVIS_URL", "NEVIS_TOKEN"):
        env.pop(name, None)
    token = kit.add_user(url, "alice", "submitter")
    other = kit.add_user(url, "bob", "submitter")
    folder = tmp_path / "nearest"
    folder.mkdir()
    shutil.copy(kit.fixture_learners / "nevis_test_learners.py", folder)
    port = _free_port()
    with open(tmp_path / "server.log", "ab") as log:
        server = subprocess.Popen(
            [str(kit.nevis), "serve", "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def ready() -> bool:
            if server.poll() is not None:
                pytest.fail(f"the server exited:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        kit.wait_for(ready, timeout_s=90, what="the server to be ready")

        def nevis(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
            return subprocess.run(
                [str(kit.nevis), *args], input=stdin, env=env, capture_output=True, text=True, timeout=600
            )

        assert nevis("login", f"http://127.0.0.1:{port}", stdin=token + "\n").returncode == 0
        run = nevis(
            "submit",
            str(folder),
            "--entrypoint",
            "nevis_test_learners:nearest_mean",
            "--stream",
            "tiny2",
            "--trials",
            "1",
            "--steps",
            "1",
            "--no-check",
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "task   1 shapes:shape" in run.stdout and "task   2 shapes:hue" in run.stdout, run.stdout
        assert "status: succeeded" in run.stdout and "E (meta_test, 1/1 tasks) = " in run.stdout
        first = nevis("logs", re.search(r"Submission (\d+):", run.stdout)[1], "--task", "1")
        assert first.returncode == 0 and "trial 0 (succeeded)" in first.stdout, first.stdout + first.stderr
        assert "prediction job" in first.stdout, first.stdout  # the evaluation's host has a log too
        board = nevis("leaderboard", "--stream", "tiny2")
        assert board.returncode == 0 and "nearest" in board.stdout and "alice" in board.stdout, board.stdout

        crashed = nevis(
            "submit",
            str(folder),
            "--entrypoint",
            "nevis_test_learners:crasher",
            "--stream",
            "tiny2",
            "--trials",
            "1",
            "--steps",
            "1",
            "--no-check",
        )
        assert crashed.returncode == 1 and "status: failed" in crashed.stdout, crashed.stdout[-3000:] + crashed.stderr
        sid = re.search(r"Submission (\d+):", crashed.stdout)[1]
        logs = nevis("logs", sid, "--task", "1", "--trial", "0")
        assert logs.returncode == 0, logs.stdout + logs.stderr
        assert "Traceback (most recent call last)" in logs.stdout and "RuntimeError: boom on task 1" in logs.stdout
        assert "trial 0 (failed)" in logs.stdout, logs.stdout
        base = f"http://127.0.0.1:{port}"
        page = httpx.get(f"{base}/submissions/{sid}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        link = re.search(rf'href="(/submissions/{sid}/logs\?task=1&amp;trial=0[^"]*)">traceback</a>', page.text)
        assert link, page.text[-3000:]
        shown = httpx.get(
            base + link[1].replace("&amp;", "&"), headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        assert "RuntimeError: boom on task 1" in shown.text
        for headers in ({"Authorization": f"Bearer {other}"}, {}):
            seen = httpx.get(f"{base}/submissions/{sid}", headers=headers, timeout=30).text
            assert 'id="log-list"' not in seen and "Traceback" not in seen  # its error message is public; logs are not
            assert httpx.get(f"{base}/submissions/{sid}/logs", headers=headers, timeout=30).status_code == 404
        assert (
            httpx.get(
                f"{base}/v1/submissions/{sid}/logs", headers={"Authorization": f"Bearer {other}"}, timeout=30
            ).status_code
            == 404
        )
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(server.pid, sig)
                server.wait(timeout=30)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        for (job,) in kit.query(url, "SELECT job_id FROM task_leases WHERE job_id IS NOT NULL"):
            try:
                os.killpg(int(job.split(":")[1]), signal.SIGKILL)
            except (ProcessLookupError, ValueError, IndexError):
                pass
