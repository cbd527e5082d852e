"""Fixtures of the coordinator tests: settings, an API client, users with tokens, a Ray head.

- ``coord_settings``: coordinator settings on the test's database (``database_url``, both
  dialects unless a module narrows it) with a streams folder holding tiny test streams.
- ``client``: a FastAPI TestClient on an app built from those settings (no scheduler).
- ``tokens``: an admin and two submitters (alice, bob), each with a token.
- ``kit``: the helper functions below, for test modules (which cannot import this file).
- ``ray_head`` (session): a real ``ray start --head`` on free ports, in its own process
  group and temp folder, killed as a group at the end (``ray stop`` would kill every Ray
  on the machine, including other test sessions').
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users
from services.store.db import make_engine, session_factory, transaction

FIXTURE_LEARNERS = Path(__file__).resolve().parents[1] / "learner_fixtures"
VENV_BIN = Path(sys.executable).parent
NEVIS = VENV_BIN / "nevis"
RULE = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}


def write_stream(folder: Path, name: str, *, tasks: int, image_size: int = 16) -> Path:
    """A stream of ``tasks`` procedurally generated shapes tasks (the last is meta-test)."""
    catalogue = [
        ("shapes:shape", "single", 4),
        ("shapes:hue", "single", 6),
        ("shapes:scale", "single", 4),
        ("shapes:multi", "multi", 4),
    ]
    years = [2004 + 4 * i for i in range(tasks - 1)] + [2020]
    doc = {
        "format": 1,
        "name": name,
        "version": "test-1",
        "description": "coordinator tests",
        "source": "tests",
        "meta_test_from_year": 2019,
        "image_size": image_size,
        "tasks": [
            {
                "order": i + 1,
                "year": years[i],
                "dataset": catalogue[i][0],
                "title": catalogue[i][0],
                "domain": "shape",
                "kind": catalogue[i][1],
                "num_classes": catalogue[i][2],
                "split": RULE,
            }
            for i in range(tasks)
        ],
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def streams_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "streams"
    folder.mkdir()
    write_stream(folder, "tiny2", tasks=2)
    write_stream(folder, "tiny3", tasks=3)
    return folder


def make_settings(database_url: str, data_dir: Path, streams_dir: Path, **overrides) -> CoordinatorSettings:
    values = dict(
        data_dir=data_dir,
        database_url=database_url,
        streams_dir=streams_dir,
        worker_command=str(NEVIS),
        poll_interval_s=0.2,
        heartbeat_interval_s=1.0,
        heartbeat_timeout_s=8.0,
        start_timeout_s=120.0,
        backoff_base_s=0.5,
        backoff_max_s=2.0,
        max_attempts=3,
        write_rate="100000/minute",  # tests of rate limits set their own
        meta_test_quota=100_000,  # tests of the meta-test quota set their own
        meta_test_ruleset_quota=100_000,  # and of the per-ruleset one
        # images as labels (made-up references need no podman); tests of image
        # learners (test_image_learners.py) set image_learners="unpack"
        image_learners="installed",
    )
    values.update(overrides)
    return CoordinatorSettings(**values)


@pytest.fixture
def coord_settings(settings_env: Path, database_url: str, streams_dir: Path) -> CoordinatorSettings:
    return make_settings(database_url, settings_env, streams_dir)


@dataclass(frozen=True)
class Tokens:
    admin: str
    alice: str
    bob: str

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {getattr(self, who)}"}


def add_user(database_url: str, name: str, role: str, **quota) -> str:
    """A user with one token; returns the token."""
    engine = make_engine(database_url)
    try:
        with transaction(session_factory(engine)) as session:
            user = users.create_user(session, name=name, role=role, **quota)
            _, secret = users.create_token(session, user=user, label="test")
    finally:
        engine.dispose()
    return secret


@pytest.fixture
def tokens(coord_settings: CoordinatorSettings) -> Tokens:
    url = coord_settings.database_url
    return Tokens(
        admin=add_user(url, "root", "admin"),
        alice=add_user(url, "alice", "submitter"),
        bob=add_user(url, "bob", "submitter"),
    )


def _test_client(settings: CoordinatorSettings):
    from fastapi.testclient import TestClient

    from services.coordinator.app import create_app

    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture
def client(coord_settings: CoordinatorSettings) -> Iterator:
    with _test_client(coord_settings) as test_client:
        yield test_client


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database at head shared by one module's tests (for tests that only read, or refuse)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("module-db") / "nevis.sqlite"
        shutil.copyfile(request.getfixturevalue("sqlite_template_path"), path)
        yield f"sqlite:///{path}"
        return
    from services.store.db import upgrade

    admin = request.getfixturevalue("postgres_admin_url")
    name = f"nevis_coord_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with engine.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    url = make_url(admin).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        with engine.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        engine.dispose()


@dataclass(frozen=True)
class SharedApi:
    client: object
    tokens: Tokens
    settings: CoordinatorSettings


@pytest.fixture(scope="module")
def shared_api(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedApi]:
    """One app, database and set of users for a whole module."""
    root = tmp_path_factory.mktemp("shared-api")
    (root / "streams").mkdir()
    write_stream(root / "streams", "tiny2", tasks=2)
    settings = make_settings(module_database_url, root / "data", root / "streams")
    found = Tokens(
        admin=add_user(module_database_url, "root", "admin"),
        alice=add_user(module_database_url, "alice", "submitter"),
        bob=add_user(module_database_url, "bob", "submitter"),
    )
    with _test_client(settings) as test_client:
        yield SharedApi(test_client, found, settings)


def query(url: str, sql: str, **params) -> list[tuple]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql), params)]
    finally:
        engine.dispose()


def learner_bundle(folder: Path) -> Path:
    """The test learners as a source archive (what a researcher would upload)."""
    path = folder / "nevis_test_learners-0.1.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(
            FIXTURE_LEARNERS / "nevis_test_learners.py", arcname="nevis_test_learners-0.1/nevis_test_learners.py"
        )
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class RayHead:
    gcs_address: str
    dashboard_url: str


@pytest.fixture(scope="session")
def ray_head() -> Iterator[RayHead]:
    """A real Ray head (2 CPUs, token auth off), on nobody's import path but its own."""
    temp = Path(tempfile.mkdtemp(prefix="nevis-rayhead-"))
    port, dashboard = _free_port(), _free_port()
    command = [
        str(VENV_BIN / "ray"),
        "start",
        "--head",
        "--port",
        str(port),
        "--num-cpus",
        "2",
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        str(dashboard),
        "--temp-dir",
        str(temp),
        "--disable-usage-stats",
        "--ray-client-server-port",
        str(_free_port()),
        "--dashboard-agent-listen-port",
        str(_free_port()),
        "--dashboard-agent-grpc-port",
        str(_free_port()),
        "--runtime-env-agent-port",
        str(_free_port()),
        "--metrics-export-port",
        str(_free_port()),
    ]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    for name in ("RAY_ADDRESS", "PYTHONPATH"):  # learners arrive as bundles, not on a path
        env.pop(name, None)
    head = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        out, _ = head.communicate(timeout=180)
        if head.returncode != 0:
            pytest.fail(f"ray start failed:\n{out[-3000:]}", pytrace=False)
        yield RayHead(gcs_address=f"127.0.0.1:{port}", dashboard_url=f"http://127.0.0.1:{dashboard}")
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(2)


def wait_for(predicate, *, timeout_s: float, what: str, interval_s: float = 0.5):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.fixture
def kit():
    """Helpers for test modules: they cannot import a conftest under importlib mode."""
    from types import SimpleNamespace

    return SimpleNamespace(
        query=query,
        wait_for=wait_for,
        add_user=add_user,
        learner_bundle=learner_bundle,
        write_stream=write_stream,
        make_settings=make_settings,
        nevis=NEVIS,
        read_status=read_status,
        fixture_learners=FIXTURE_LEARNERS,
    )


@pytest.fixture(scope="module")
def live_server(shared_api) -> Iterator[int]:
    """The shared API served by a real uvicorn on a free port (for raw-socket tests); its port."""
    from services.coordinator.app import create_app
    from tests.support.browser import served

    with served(create_app(shared_api.settings)) as url:
        yield int(url.rsplit(":", 1)[1])


def read_status(sock: socket.socket) -> str:
    """The status line of the HTTP response arriving on ``sock``."""
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()
