"""Learner images as files for the sandbox: built here with podman, registered by digest over
the API, unpacked contained, trained and scored on the ``local`` and ``ray`` backends, loaded
by the probe pool.

Two tiny images are built once for the module (tests/support/learner_images.py): ``plain``
(the test learners, plus a sitecustomize, usercustomize, .pth files and fake ``ray`` and
``services`` packages, and an ENTRYPOINT, CMD, USER and ENV that are ignored) and
``hostile-fs`` (a setuid binary, a device node, a hard link, a symlink to ``/`` and one
climbing out of the root).
"""

from __future__ import annotations

import builtins
import json
import pickle
import stat
import time

import pytest
from sqlalchemy import select

from services.coordinator.backends.base import LaunchSpec
from services.coordinator.backends.local import LocalBackend
from services.coordinator.backends.ray_jobs import RayJobsBackend
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.scheduler.loop import Scheduler
from services.store.db import make_engine, session_factory
from services.store.db.models import Submission, TaskResult, TaskRun
from services.store.objects import open_store
from tests.integration.coordinator.conftest import _test_client
from tests.support.learner_images import MARK, PY, shared_images
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.images import ImageLimits, unpack_image
from workers.sandbox.learner_calls import describe

pytestmark = pytest.mark.images
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory):
    """The learner images, built once per test process (shared with the other image tests);
    removed when it exits."""
    return shared_images(tmp_path_factory.mktemp("images"))


def _harness_ran_nothing() -> None:
    assert not [k for k in dir(builtins) if k.startswith(MARK)]  # this process never imported them


def test_hostile_image_files_are_contained_and_never_run_at_host_start(images, tmp_path):
    cache = tmp_path / "images"
    plain = unpack_image(images["plain"], cache=cache, limits=ImageLimits())
    fs = unpack_image(images["hostile-fs"], cache=cache, limits=ImageLimits())
    assert plain.import_paths == (
        str(plain.root / "opt" / "learner"),
        str(plain.root / "usr" / "local" / "lib" / PY / "site-packages"),
    )
    _harness_ran_nothing()
    with LearnerHost(HostSpec("nevis_img_probe:make", import_paths=plain.import_paths, sandbox="bwrap")) as host:
        facts = pickle.loads(describe(host).init_state)
    assert facts["ran"] == []  # no sitecustomize, usercustomize or .pth of the image ran
    for module, origin in facts["origins"].items():  # the host's own, never the image's
        assert not origin.startswith(str(plain.root)), (module, origin)
    with LearnerHost(HostSpec("nevis_img_probe:make", import_paths=fs.import_paths, sandbox="bwrap")) as host:
        facts = pickle.loads(describe(host).init_state)
    assert facts["su"] is not None and not facts["su"] & (stat.S_ISUID | stat.S_ISGID)
    assert facts["hard"] is not None and stat.S_ISREG(facts["hard"]) and not facts["hard"] & stat.S_ISUID
    assert facts["dev"] is None and facts["escape"] is None  # device dropped, escaping link removed
    assert facts["to_root"] == str(fs.root)  # "/" became the image's own root...
    assert facts["root_listing"] == ["opt"]  # ...of which the host sees only /opt/learner
    _harness_ran_nothing()


def _client(coord_settings, **overrides):
    return _test_client(coord_settings.model_copy(update={"image_learners": "unpack", **overrides}))


@ON_SQLITE
@pytest.mark.parametrize(
    ("image", "entrypoint", "overrides", "field", "words"),
    [
        ("plain", "nevis_test_learners:cheater", {"image_max_layers": 1}, "image", "NEVIS_IMAGE_MAX_LAYERS"),
        ("hostile-fs", "nevis_img_probe:make", {"image_max_files": 3}, "image", "NEVIS_IMAGE_MAX_FILES"),
        ("hostile-fs", "nevis_img_probe:make", {"image_max_bytes": 4}, "image", "NEVIS_IMAGE_MAX_BYTES"),
        ("plain", "not_in_the_image:make", {}, "entrypoint", "no module 'not_in_the_image'"),
        ("absent", "nevis_img_probe:make", {}, "image", "not in this machine's image store"),
    ],
    ids=["layers", "files", "bytes", "module", "absent"],
)
def test_an_image_over_a_cap_or_without_its_module_is_a_422_naming_why(
    images, coord_settings, tokens, image, entrypoint, overrides, field, words
):
    ref = images.get(image, "localhost/nevis-test-image-absent:1")
    with _client(coord_settings, **overrides) as client:
        response = client.post(
            "/v1/learners",
            headers=tokens.auth("alice"),
            json={"name": f"refused-{image}", "entrypoint": entrypoint, "image": ref},
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field and words in response.json()["detail"], response.json()
        listed = client.get("/v1/learners", headers=tokens.auth("alice")).json()["items"]
    assert listed == []


@ON_SQLITE
def test_a_plain_image_learner_registers_by_digest_trains_and_is_scored_contained(images, coord_settings, tokens):
    settings = coord_settings.model_copy(update={"image_learners": "unpack", "max_attempts": 1})
    with _test_client(settings) as client:
        learner = client.post(
            "/v1/learners",
            headers=tokens.auth("alice"),
            json={"name": "from-image", "entrypoint": "nevis_test_learners:cheater", "image": images["plain"]},
        )
        assert learner.status_code == 201, learner.text
        pinned = learner.json()["image"]
        assert pinned.startswith(images["plain"].rsplit(":", 1)[0] + "@sha256:"), pinned  # by digest
        assert learner.json()["image_size_bytes"] > 0  # what registration unpacked
        sub = client.post(
            "/v1/submissions",
            headers=tokens.auth("alice"),
            json={"learner_id": learner.json()["id"], "stream": "tiny2", "budget": {"trials": 1, "steps": 1}},
        )
        assert sub.status_code == 201, sub.text
    _harness_ran_nothing()
    # the ray backend would run the harness in the service's image, never the learner's
    spec = LaunchSpec(
        lease_id=1,
        submission_id=1,
        task_order=1,
        attempt=1,
        learner_name="x",
        entrypoint="m:f",
        image=pinned,
        resources=ResourceRequest(),
    )
    ray = RayJobsBackend(settings.model_copy(update={"ray_address": "http://head:8265", "ray_secrets_path": "/x"}))
    assert "image_uri" not in ray.runtime_env(spec) and pinned not in json.dumps(ray.runtime_env(spec))

    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    try:
        scheduler = Scheduler(settings, backend=LocalBackend(settings), sessions=sessions)
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            scheduler.tick()
            with sessions() as session:
                if session.get(Submission, sub.json()["id"]).status not in ("queued", "running"):
                    break
            time.sleep(1)
        with sessions() as session:
            submission = session.get(Submission, sub.json()["id"])
            logs = "".join(p.read_text()[-3000:] for p in (settings.data_dir / "logs" / "workers").glob("*"))
            assert submission.status == "succeeded", (submission.status, submission.error, logs)
            results = session.scalars(select(TaskResult)).all()
            state_keys = session.scalars(select(TaskRun.learner_state_key)).all()
    finally:
        engine.dispose()
    assert len({r.stream_task_id for r in results}) == 2 and all(0 <= r.error <= 1 for r in results)
    cheats = pickle.loads(open_store(settings.store_url).get_bytes(state_keys[-1]))["cheats"]
    for record in cheats:  # what the learner tried in train(), from its image's files
        machine = record["machine"]
        assert record["creds"] == {"NEVIS_DATABASE_URL": "", "NEVIS_STORE_URL": "", "NEVIS_DATA_DIR": ""}
        assert machine["targets"] and machine["env_secrets"] == [] and machine["foreign_environs_with_secrets"] == []
        assert machine["readable_paths"] == [] and machine["connected"] == [] and machine["visible_pids"] <= 3


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_on_the_ray_backend_an_image_learner_trains_from_its_files_never_as_the_jobs_image(
    images, coord_settings, tokens, ray_head, kit, tmp_path
):
    kit.write_stream(coord_settings.streams_dir, "tiny1", tasks=1)
    secrets = tmp_path / "worker-secrets"  # as a mounted Secret: one file per name
    secrets.mkdir()
    for name, value in {
        "NEVIS_DATABASE_URL": coord_settings.database_url,
        "NEVIS_STORE_URL": coord_settings.store_url,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
    }.items():
        (secrets / name).write_text(value + "\n")
    settings = coord_settings.model_copy(
        update={
            "image_learners": "unpack",
            "max_attempts": 1,
            "backend": "ray",
            "ray_address": ray_head.dashboard_url,
            "ray_secrets_path": str(secrets),
        }
    )
    with _test_client(settings) as client:
        learner = client.post(
            "/v1/learners",
            headers=tokens.auth("alice"),
            json={"name": "from-image-ray", "entrypoint": "nevis_test_learners:cheater", "image": images["plain"]},
        )
        assert learner.status_code == 201, learner.text
        sub = client.post(
            "/v1/submissions",
            headers=tokens.auth("alice"),
            json={"learner_id": learner.json()["id"], "stream": "tiny1", "budget": {"trials": 1, "steps": 1}},
        )
        assert sub.status_code == 201, sub.text
    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    try:
        scheduler = Scheduler(settings, backend=RayJobsBackend(settings), sessions=sessions)
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            scheduler.tick()
            with sessions() as session:
                if session.get(Submission, sub.json()["id"]).status not in ("queued", "running"):
                    break
            time.sleep(1)
        with sessions() as session:
            submission = session.get(Submission, sub.json()["id"])
            assert submission.status == "succeeded", (submission.status, submission.error)
            assert session.scalar(select(TaskResult.id)) is not None
            state_key = session.scalar(select(TaskRun.learner_state_key))
    finally:
        engine.dispose()
    machine = pickle.loads(open_store(settings.store_url).get_bytes(state_key))["cheats"][0]["machine"]
    assert machine["env_secrets"] == [] and machine["readable_paths"] == [] and machine["connected"] == []
    _harness_ran_nothing()


def test_the_probe_pool_loads_an_image_learner_from_its_unpacked_files(images, tmp_path):
    from services.store.objects import LocalObjectStore
    from workers.probe.runtime.probe_runtime import ProbeRuntime

    runtime = ProbeRuntime(None, LocalObjectStore(tmp_path / "store"), images_dir=tmp_path / "images")
    try:
        learner = runtime.learner("nevis_test_learners:nearest_mean", image=images["plain"])
        assert describe(learner.host).name == "nearest-mean"  # imported from the image's /opt/learner
        assert [p.name for p in (tmp_path / "images").iterdir() if not p.name.startswith(".")]
        assert runtime.learner("nevis_test_learners:nearest_mean", image=images["plain"]) is learner
    finally:
        runtime.close()
    _harness_ran_nothing()
