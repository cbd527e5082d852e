"""``.venv/bin/nevis serve`` with the venv not activated (no ``nevis`` on ``PATH``) runs a
submission to the end, and leaves no zombie worker processes behind (issue 8).

The server is a real process started through the venv's own path, with a ``PATH`` that
does not hold the venv's ``bin`` and no ``NEVIS_WORKER_COMMAND``: the ``local`` backend
must start its workers with the server's own interpreter. The learner is the README's
example, uploaded as a bundle; it runs on the meta-train phase of the built-in ``mini``
stream (3 tasks), each worker starting its own Ray.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import httpx
import pytest

VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's python is a symlink
NEVIS = VENV_BIN / "nevis"
README_TEST = Path(__file__).resolve().parents[1] / "test_readme_example.py"
POLL_INTERVAL_S = 0.3
# Variables of the developer's own set-up that would hide the defect or leak into the run.
_DROPPED = (
    "NEVIS_WORKER_COMMAND",
    "NEVIS_BACKEND",
    "NEVIS_RAY_ADDRESS",
    "NEVIS_STORE_URL",
    "NEVIS_S3_ENDPOINT_URL",
    "NEVIS_STREAMS_DIR",
    "NEVIS_ENVIRONMENT",
    "RAY_ADDRESS",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "PYTHONHOME",
)


def _readme_learner_source() -> str:
    """The README's example learner, extracted the way test_readme_example.py does it."""
    spec = importlib.util.spec_from_file_location("_nevis_readme_example", README_TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.readme_learner_source()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _children(parent: int) -> dict[int, str]:
    """The processes whose parent is ``parent``, with their states (Z: a zombie)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        info = _proc_stat(int(stat.parent.name))
        if info is not None and info[1] == parent:
            found[int(stat.parent.name)] = info[0]
    return found


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    venv_bin = {str(VENV_BIN), str(VENV_BIN.resolve())}
    path = [
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and p not in venv_bin and Path(p).resolve() != VENV_BIN.resolve()
    ]
    env["PATH"] = os.pathsep.join(path or ["/usr/bin", "/bin"])
    env.update(
        {
            "NEVIS_DATA_DIR": str(tmp_path / "data"),
            "NEVIS_DATABASE_URL": f"sqlite:///{tmp_path / 'coordinator.sqlite'}",
            "NEVIS_POLL_INTERVAL_S": str(POLL_INTERVAL_S),
            "NEVIS_HEARTBEAT_INTERVAL_S": "2",
            "NEVIS_HEARTBEAT_TIMEOUT_S": "60",
            "NEVIS_BACKOFF_BASE_S": "0.5",
            "NEVIS_BACKOFF_MAX_S": "2",
            "RAY_AUTH_MODE": "disabled",
        }
    )
    return env


def _bundle(folder: Path) -> Path:
    source = folder / "readme_learner.py"
    source.write_text(_readme_learner_source())
    path = folder / "readme_learner-0.1.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(source, arcname="readme_learner-0.1/readme_learner.py")
    return path


def test_venv_nevis_serve_runs_workers_without_nevis_on_path_and_reaps_them(tmp_path, kit):  # noqa: C901
    env = _env(tmp_path)
    assert NEVIS.exists(), NEVIS
    assert shutil.which("nevis", path=env["PATH"]) is None, env["PATH"]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [str(NEVIS), "serve", "--port", str(port), "--log-level", "warning"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def server_log() -> str:
        return log.read_text(errors="replace")[-4000:]

    def ready():
        if server.poll() is not None:
            pytest.fail(f"the server exited ({server.returncode}):\n{server_log()}")
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        kit.wait_for(ready, timeout_s=120, what="the server to be ready")
        done = subprocess.run(
            [str(NEVIS), "users", "create", "alice", "--role", "submitter"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        made = subprocess.run(
            [str(NEVIS), "tokens", "create", "--user", "alice"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
        headers = {"Authorization": f"Bearer {made.stdout.strip()}"}

        bundle = _bundle(tmp_path)
        with open(bundle, "rb") as handle:
            learner = httpx.post(
                f"{base}/v1/learners/bundle",
                headers=headers,
                timeout=60,
                data={"name": "readme-linear", "entrypoint": "readme_learner:make"},
                files={"file": (bundle.name, handle, "application/gzip")},
            )
        assert learner.status_code == 201, learner.text
        created = httpx.post(
            f"{base}/v1/submissions",
            headers=headers,
            timeout=60,
            json={
                "learner_id": learner.json()["id"],
                "stream": "mini",
                "phase": "meta_train",
                "budget": {"trials": 1, "steps": 2, "max_concurrent": 1},
            },
        )
        assert created.status_code == 201, created.text
        sub_id = created.json()["id"]

        def finished():
            if server.poll() is not None:
                pytest.fail(f"the server exited ({server.returncode}):\n{server_log()}")
            body = httpx.get(f"{base}/v1/submissions/{sub_id}", headers=headers, timeout=30).json()
            done = body["status"] not in ("queued", "running") and body["current_task"] is None
            return body if done else None

        body = kit.wait_for(finished, timeout_s=900, what="the submission to finish", interval_s=2)
        worker_logs = "\n".join(
            p.read_text(errors="replace")[-2000:]
            for p in sorted((tmp_path / "data" / "logs" / "workers").glob("*.log"))
        )
        assert body["status"] == "succeeded", (body, worker_logs)
        assert [t["status"] for t in body["tasks"]] == ["committed"] * 3, body
        leases = kit.query(
            env["NEVIS_DATABASE_URL"], "SELECT task_order, attempt, status, job_id FROM task_leases ORDER BY id"
        )
        assert [row[:3] for row in leases] == [(1, 1, "succeeded"), (2, 1, "succeeded"), (3, 1, "succeeded")], leases
        workers = [int(job_id.split(":")[1]) for *_, job_id in leases]

        # Every worker has ended and been waited on: none is left under the server, as a
        # zombie or at all, a few scheduler passes after it exits.
        deadline = time.monotonic() + 60 + 20 * POLL_INTERVAL_S
        while True:
            children = _children(server.pid)
            left = {pid: state for pid, state in children.items() if pid in workers or state == "Z"}
            if not left or time.monotonic() > deadline:
                break
            time.sleep(POLL_INTERVAL_S)
        assert left == {}, f"workers {workers}; children of the server left: {children}"
        assert server.poll() is None, server_log()
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
        try:
            launched = kit.query(env["NEVIS_DATABASE_URL"], "SELECT job_id FROM task_leases WHERE job_id IS NOT NULL")
        except Exception:  # noqa: BLE001 - the server never made the schema
            launched = []
        for (job_id,) in launched:
            try:  # whatever a worker left running (a failed test, its own Ray)
                os.killpg(int(job_id.split(":")[1]), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    # uvicorn shuts down gracefully on SIGTERM, then ends by that signal
    assert server.returncode in (0, -signal.SIGTERM), server_log()
