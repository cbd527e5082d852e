"""The container images of docker/, built with podman and run on this machine.

`docker/build.sh` builds every image (but the CUDA worker) from a Debian base made here with
debootstrap. Then one deployment runs as it would on a single host (docs/deploy.md, "One
machine with podman"), on the host's network, against the host's PostgreSQL in a fresh
database:

- the coordinator image serves the API, scheduler and dashboard (`nevis serve`, the `ray`
  backend) and migrates the database; `/readyz` answers;
- a Ray head runs in the example learner image (the worker image plus the README's linear
  learner in /opt/learner), holding the harness's settings as files, as a Secret would;
- through the REST API, a user registers the learner image's entry point and submits it on
  the `mini` stream with a FLOP cap that stops the submission after its first task; the
  coordinator launches that task as a Ray job on the head, whose harness runs the learner in
  its bubblewrap sandbox inside the container and commits the result to PostgreSQL;
- the coordinator reports the task's error and FLOPs; then the probe worker image probes the
  task's checkpoints from the same database and object store (linear probes, `ci` settings,
  features from sandboxed learner hosts) and the dashboard serves the report.

The images run as the unprivileged `nevis` user (uid 1000). Needs podman (with runc) and
root, as CI has (.ci/run installs them); marked `images` so a developer can leave it out
with `-m "not images"`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from services.cli.learner_template import LEARNER

pytestmark = [pytest.mark.images, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
PODMAN = os.environ.get("PODMAN", "podman")
RUNTIME = os.environ.get("NEVIS_OCI_RUNTIME", "runc")
VERSION = next(
    line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines() if line.startswith("version = ")
)
IMAGES = {
    name: f"localhost/nevis-{name}:{VERSION}"
    for name in ("coordinator", "worker", "probe-worker", "learner-base", "learner-example")
}
NEVIS_UID = "1000"
# bubblewrap mounts a fresh /proc for each learner host; the kernel allows that only where the
# container's /proc has no masked paths over it (the chart's procMount: Unmasked). Learner
# containers run under the chart's own learner seccomp profile, so this test shows that the
# profile the chart installs on the nodes lets Ray, PyTorch and bubblewrap work.
LEARNER_SECCOMP = ROOT / "helm" / "nevis" / "files" / "seccomp" / "learner-v1.json"
SANDBOX_OPTS = ("--security-opt", "unmask=/proc/*", "--security-opt", f"seccomp={LEARNER_SECCOMP}")


def podman(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([PODMAN, f"--runtime={RUNTIME}", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(
            f"podman {' '.join(args[:3])} ... failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}",
            pytrace=False,
        )
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(method: str, url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict | str]:
    """One request; (status, JSON body or text)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        url, method=method, headers=headers, data=json.dumps(body).encode() if body is not None else None
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError) as exc:  # not listening yet
        return 0, str(exc)
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def wait_for(predicate, *, timeout_s: float, what: str, logs=lambda: "", interval_s: float = 1.0):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {timeout_s:.0f} s\n{logs()}", pytrace=False)
        time.sleep(interval_s)


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Every image of docker/ (not the CUDA worker), built by docker/build.sh."""
    assert shutil.which(PODMAN), "podman is not installed: apt-get install podman runc debootstrap"
    started = time.monotonic()
    build = subprocess.run([str(ROOT / "docker" / "build.sh")], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, f"docker/build.sh failed:\n{build.stdout[-4000:]}\n{build.stderr[-6000:]}"
    print(f"\ndocker/build.sh: {time.monotonic() - started:.0f} s")
    for name, image in IMAGES.items():  # noqa: B007
        size = podman("image", "inspect", "--format", "{{.Size}}", image).stdout.strip()
        print(f"{image}: {int(size) / 1e6:.0f} MB")
    return IMAGES


@dataclass(frozen=True)
class Deployment:
    api: str
    database_url: str
    coordinator: str
    ray_head: str
    store: Path
    secrets: Path


def container_logs(*names: str) -> str:
    """The last lines each container wrote (podman logs keeps stdout and stderr apart)."""
    out = []
    for name in names:
        logs = podman("logs", "--tail", "80", name, check=False, timeout=60)
        out.append(f"--- podman logs {name} ---\n{logs.stdout[-4000:]}{logs.stderr[-6000:]}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def deployment(
    images: dict[str, str], postgres_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The coordinator and a Ray head (example learner image) on the host's network, against a
    fresh PostgreSQL database and a shared object-store folder."""
    suffix = uuid.uuid4().hex[:10]
    name = f"nevis_images_{os.getpid()}_{suffix}"
    admin = create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    url = make_url(postgres_admin_url).set(database=name).render_as_string(hide_password=False)

    work = tmp_path_factory.mktemp("images")
    store, secrets = work / "store", work / "secrets"
    store.mkdir()
    secrets.mkdir()
    # The harness's settings, one file per name, as a Kubernetes Secret mounts them: only the
    # Ray head (the harness's node) gets them; learner code, in its sandbox, does not.
    for key, value in {
        "NEVIS_DATABASE_URL": url,
        "NEVIS_STORE_URL": "file:///var/lib/nevis/store",
        "NEVIS_DATA_DIR": "/var/lib/nevis",
    }.items():
        (secrets / key).write_text(value + "\n")
    for path in (work, store, secrets, *secrets.iterdir()):
        os.chown(path, int(NEVIS_UID), int(NEVIS_UID))
    os.chmod(secrets, 0o700)

    gcs, dashboard, api_port = free_port(), free_port(), free_port()
    ray_name, coord_name = f"nevis-test-ray-{suffix}", f"nevis-test-coordinator-{suffix}"
    try:
        podman(
            "run",
            "-d",
            "--name",
            ray_name,
            "--network",
            "host",
            "--shm-size",
            "1g",
            *SANDBOX_OPTS,
            "-v",
            f"{secrets}:/var/run/secrets/nevis:ro",
            "-v",
            f"{store}:/var/lib/nevis/store",
            "-e",
            "RAY_AUTH_MODE=disabled",
            images["learner-example"],
            "ray",
            "start",
            "--head",
            "--block",
            "--port",
            str(gcs),
            "--num-cpus",
            "2",
            "--include-dashboard",
            "true",
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(dashboard),
            "--disable-usage-stats",
            "--ray-client-server-port",
            str(free_port()),
            "--node-manager-port",
            str(free_port()),
            "--object-manager-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--dashboard-agent-grpc-port",
            str(free_port()),
            "--runtime-env-agent-port",
            str(free_port()),
            "--metrics-export-port",
            str(free_port()),
        )
        podman(
            "run",
            "-d",
            "--name",
            coord_name,
            "--network",
            "host",
            "-v",
            f"{store}:/var/lib/nevis/store",
            "-e",
            f"NEVIS_DATABASE_URL={url}",
            "-e",
            "NEVIS_STORE_URL=file:///var/lib/nevis/store",
            "-e",
            "NEVIS_BACKEND=ray",
            "-e",
            f"NEVIS_RAY_ADDRESS=http://127.0.0.1:{dashboard}",
            "-e",
            "NEVIS_RAY_SECRETS_PATH=/var/run/secrets/nevis",
            # One Ray node, which runs the learner's image already (an operator's own): the
            # image is a label, its code the node's installation (no podman in these images).
            "-e",
            "NEVIS_IMAGE_LEARNERS=installed",
            "-e",
            "NEVIS_SANDBOX=bwrap",
            "-e",
            "NEVIS_PROBE_PRESET=ci",
            images["coordinator"],
            "nevis",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(api_port),
            "--migrate",
        )
        yield Deployment(
            api=f"http://127.0.0.1:{api_port}",
            database_url=url,
            coordinator=coord_name,
            ray_head=ray_name,
            store=store,
            secrets=secrets,
        )
    finally:
        for container in (coord_name, ray_name):
            podman("rm", "-f", "-t", "5", container, check=False, timeout=120)
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def test_images_run_a_mini_task_end_to_end(images, deployment):
    d = deployment
    logs = lambda: container_logs(d.coordinator, d.ray_head)  # noqa: E731

    # The coordinator: migrated the fresh database, ready, as the unprivileged user.
    ready = wait_for(
        lambda: (r := http("GET", f"{d.api}/readyz"))[0] == 200 and r,
        timeout_s=180,
        what="the coordinator's /readyz",
        logs=logs,
    )
    assert ready[1] == {"status": "ready", "checks": {"database": "ok", "scheduler": "ok"}}, ready
    assert podman("exec", d.coordinator, "id", "-u").stdout.strip() == NEVIS_UID
    assert podman("exec", d.ray_head, "id", "-u").stdout.strip() == NEVIS_UID
    status, page = http("GET", f"{d.api}/")
    assert status == 200 and "<html" in page.lower()

    # An operator makes a user and a token with the image's CLI.
    podman("exec", d.coordinator, "nevis", "users", "create", "alice", "--role", "submitter")
    token = podman("exec", d.coordinator, "nevis", "tokens", "create", "--user", "alice").stdout.strip().split()[-1]

    # The learner in the example image, by entry point; the mini stream, stopped by a FLOP cap
    # with its first task (the commit that reaches the cap stops the run, in the same
    # transaction); two checkpoints (untrained, trained) for the probes below.
    status, learner = http(
        "POST",
        f"{d.api}/v1/learners",
        token=token,
        body={"name": "linear", "entrypoint": "nevis_example_learner:make", "image": images["learner-example"]},
    )
    assert status == 201, learner
    status, sub = http(
        "POST",
        f"{d.api}/v1/submissions",
        token=token,
        body={
            "learner_id": learner["id"],
            "stream": "mini",
            "phase": "meta_test",
            "budget": {"trials": 1, "steps": 5, "flop_cap": 1.0, "checkpoint_fractions": [0.0, 1.0]},
        },
    )
    assert status in (200, 201), sub

    def ended():
        code, body = http("GET", f"{d.api}/v1/submissions/{sub['id']}", token=token)
        assert code == 200, body
        return body if body["status"] not in ("queued", "running") else None

    done = wait_for(ended, timeout_s=900, interval_s=3, what=f"submission {sub['id']} to end", logs=logs)
    tasks = {task["order"]: task for task in done["tasks"]}
    first = tasks[1]
    assert (first["dataset"], first["status"], first["trials"], first["failed_trials"]) == (
        "sklearn:digits",
        "committed",
        1,
        0,
    ), done
    assert 0.0 <= first["error"] <= 1.0 and first["flops"] > 0, done
    assert [order for order, task in tasks.items() if task["status"] == "committed"] == [1], done
    # A run that did what its owner asked (stop at the cap) is "stopped", not failed; its error
    # names the cap. No later task has a task run: nothing but task 1 was attempted.
    assert done["status"] == "stopped" and done["error"].startswith("FLOP cap 1 reached ("), done
    assert done["finished_at"] is not None, done
    assert all((task["status"], task["trials"]) == ("pending", 0) for order, task in tasks.items() if order > 1), done
    assert done["cflop"] == pytest.approx(first["flops"])

    # The Ray job's harness sandboxed the learner: the run's events say where it ran.
    job = done["current_task"] or {}
    status, events = http("GET", f"{d.api}/v1/submissions/{sub['id']}/events?limit=500", token=token)
    assert status == 200, events
    # One launch only: the coordinator never launched a job for task 2 (the cap stopped the run
    # when task 1 committed, before any later claim could see it open).
    kinds = [e["kind"] for e in events["items"]]
    claimed = [e["payload"]["order"] for e in events["items"] if e["kind"] == "lease.claimed"]
    assert claimed == [1], kinds
    assert kinds.count("task.started") == 1 and kinds.count("submission.stopped") == 1, kinds
    print(
        f"\nsubmission {sub['id']}: task 1 error {first['error']:.4f}, FLOPs {first['flops']:.3e}, "
        f"wall {first['wall_time_s']} s; events: {[e['kind'] for e in events['items']]} {job}"
    )

    # The probe worker image probes the committed task's checkpoints from the same database
    # and store (the harness's settings, as the probe workers' Secret would hold them): the
    # `ci` settings with linear probes, by its own workers (the pool `nevis probe-workers`
    # runs), each checkpoint's features from a sandboxed learner host. It loads checkpoints
    # with the learner's own code, so an image learner's folder is named in NEVIS_LEARNER_PATHS
    # (learner hosts see it read-only; never on the probe worker's own import path; an uploaded
    # bundle would come from the store by itself).
    probe_name = f"nevis-test-probes-{uuid.uuid4().hex[:10]}"
    learner_dir = d.store.parent / "learner"  # the example image's /opt/learner, from its one source
    learner_dir.mkdir(exist_ok=True)
    (learner_dir / "nevis_example_learner.py").write_text(LEARNER)
    try:
        probe = podman(
            "run",
            "--rm",
            "--name",
            probe_name,
            "--network",
            "host",
            *SANDBOX_OPTS,
            "-v",
            f"{d.store}:/var/lib/nevis/store",
            "-v",
            f"{learner_dir}:/opt/learner:ro",
            "-e",
            "NEVIS_LEARNER_PATHS=/opt/learner",
            "-e",
            "NEVIS_IMAGE_LEARNERS=installed",  # as the coordinator: the image is a label here
            "-e",
            f"NEVIS_DATABASE_URL={d.database_url}",
            "-e",
            "NEVIS_STORE_URL=file:///var/lib/nevis/store",
            images["probe-worker"],
            "nevis",
            "probe",
            "run",
            "--submission",
            str(sub["id"]),
            "--preset",
            "ci",
            "--kinds",
            "linear",
            "--workers",
            "2",
            timeout=900,
        )
    finally:
        podman("rm", "-f", "-t", "5", probe_name, check=False, timeout=120)
    assert probe.returncode == 0, probe.stderr
    code, report = http("GET", f"{d.api}/submissions/{sub['id']}/probes.json")
    assert code == 200, report
    print(f"probe jobs {report['jobs']}, {len(report['checkpoints'])} checkpoints probed")
    assert report["failures"] == [] and report["checkpoints"], json.dumps(report)[:3000]
    assert {c["task_order"] for c in report["checkpoints"]} == {1}, json.dumps(report)[:3000]
