"""``nevis serve --no-scheduler --workers 2``: two uvicorn worker processes on one port serve the
leaderboard, each from its own cache, with the same bytes and ETag; they end with the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from services.store.db import sessions_on, transaction, upgrade
from tests.support.synthetic_results import seed_results

NEVIS = Path(sys.executable).parent / "nevis"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _workers(parent: int) -> list[int]:
    """The worker processes (multiprocessing spawns) whose parent is ``parent``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[-1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


def test_two_worker_processes_serve_the_same_answers(tmp_path):
    url = f"sqlite:///{tmp_path / 'nevis.sqlite'}"
    upgrade(url)
    with transaction(sessions_on(url)) as session:
        seed_results(session, submissions=12, tasks=3, seed=3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEVIS_")}
    env.update({"NEVIS_DATABASE_URL": url, "NEVIS_DATA_DIR": str(tmp_path / "data"), "NEVIS_PROBE_PRESET": "off"})
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [str(NEVIS), "serve", "--no-scheduler", "--workers", "2", "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if len(_workers(server.pid)) < 2:
                return False
            try:
                return httpx.get(base + "/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        deadline = time.monotonic() + 180
        while not ready():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        workers = _workers(server.pid)
        assert len(workers) == 2, workers
        answers = []
        for _ in range(8):  # new connections: the kernel hands them to either worker
            with httpx.Client(base_url=base, timeout=30) as client:
                answers.append(client.get("/v1/leaderboard?limit=5"))
        assert {a.status_code for a in answers} == {200}
        assert len({a.headers["etag"] for a in answers}) == 1 and len({a.content for a in answers}) == 1
        assert len(answers[0].json()["items"]) == 5
    finally:
        server.terminate()  # the server only: it stops its workers
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            raise
    assert not [pid for pid in workers if _alive(pid)]


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False
