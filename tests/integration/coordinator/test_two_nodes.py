"""A real two-node Ray cluster on this machine (issue 46): a head and a learner node, each its
own raylet started with ``ray start``. A submission through the ``ray`` backend runs its job's
driver and harness actor on the head; its trials must land on the learner node, the only one
advertising ``NEVIS_LEARNER_NODE_RESOURCE``. The test shows the learner hosts start there (their
processes descend from that node's raylet; the executors' Ray node is that node), the task's
train split reaches them shard by shard and their checkpoints come back through the store
(the harness on the head), and the task commits once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from services.coordinator.backends.ray_jobs import RayJobsBackend
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.crud import learners, submission_create, users
from services.coordinator.scheduler.loop import Scheduler
from services.core.budget import RunBudget
from services.store.db import sessions_on, transaction
from services.store.db.models import Submission
from services.store.db.models_coordinator import TaskLease
from services.store.objects import open_store
from tests.support.ray_cluster import LEARNER_RESOURCE, two_node_cluster

pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]

HOST_MODULES = {b"workers.sandbox.host", b"workers.sandbox.host_boot"}


@pytest.fixture(scope="module")
def cluster():
    """The head and the learner node; the worker harness (a job on the head) inherits the
    head's environment, which sends every train split by shard (so shards cross nodes)."""
    env = {"NEVIS_STREAM_TRAIN_BYTES": "1"}
    with two_node_cluster(extra_env=env) as running:
        yield running


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _hosts_by_raylet(raylets: dict[int, str]) -> dict[int, str]:
    """Live learner host processes → the node ("head"/"learner") whose raylet they descend from
    ("none" where no raylet is found above them)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not HOST_MODULES & set(argv) or argv[0].endswith(b"bwrap"):
            continue
        pid, node = int(entry.name), "none"
        while pid and pid > 1:
            if pid in raylets:
                node = raylets[pid]
                break
            pid = _parent(pid) or 0
        found[int(entry.name)] = node
    return found


def test_trials_land_on_the_learner_node_and_the_task_commits_once(cluster, coord_settings, kit, tmp_path):
    from ray.util.state import list_actors

    kit.write_stream(coord_settings.streams_dir, "tiny1", tasks=1)
    secrets = tmp_path / "worker-secrets"
    secrets.mkdir()
    for name, value in {
        "NEVIS_DATABASE_URL": coord_settings.database_url,
        "NEVIS_STORE_URL": coord_settings.store_url,
        "NEVIS_DATA_DIR": str(coord_settings.data_dir),
    }.items():
        (secrets / name).write_text(value + "\n")
    settings = coord_settings.model_copy(
        update={
            "backend": "ray",
            "ray_address": cluster.dashboard_url,
            "ray_secrets_path": str(secrets),
            "learner_node_resource": LEARNER_RESOURCE,  # a worker knob: the job's runtime env carries it
        }
    )
    sessions = sessions_on(settings.database_url)
    store = open_store(settings.store_url)
    bundle = kit.learner_bundle(tmp_path)
    info = store.put_file(f"learners/bundles/test/{bundle.name}", bundle)
    with transaction(sessions) as session:
        user = users.create_user(session, name="alice", role="submitter")
        owned = learners.create_learner(
            session,
            owner=user,
            name="nearest",
            entrypoint="nevis_test_learners:nearest_mean",
            image=None,
            resources=ResourceRequest(),
            bundle_key=info.key,
            bundle_sha256=info.sha256,
            bundle_size_bytes=info.size,
        )
        budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(0.0, 1.0))
        request = submission_create.SubmissionRequest(
            learner_id=owned.learner.id, stream="tiny1", phase="meta_test", budget=budget
        )
        sub_id = submission_create.create_submission(session, settings=settings, user=user, request=request)[0].id

    learner_node = cluster.learner_node_id()
    raylets = {pid: "head" for pid in cluster.head.raylet_pids()} | {
        pid: "learner" for pid in cluster.learner.raylet_pids()
    }
    assert sorted(raylets.values()) == ["head", "learner"], raylets
    scheduler = Scheduler(settings, backend=RayJobsBackend(settings), sessions=sessions)
    hosts: dict[int, str] = {}
    started = time.monotonic()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        scheduler.tick()
        hosts |= _hosts_by_raylet(raylets)
        with sessions() as session:
            ended = session.get(Submission, sub_id).status not in ("queued", "running")
            active = session.scalar(
                select(TaskLease.id).where(TaskLease.status.in_(("launching", "launched", "running")))
            )
        if ended and not active:
            break
        time.sleep(0.5)
    print(f"two-node submission took {time.monotonic() - started:.1f} s")
    with sessions() as session:
        submission = session.get(Submission, sub_id)
        lease = session.scalar(select(TaskLease))
        assert submission.status == "succeeded", (submission.error, lease and lease.error)

    # learner hosts started on the learner node, none on the head (hosts of other test
    # sessions on this machine descend from no raylet of this cluster)
    ours = {pid: node for pid, node in hosts.items() if node != "none"}
    assert ours and set(ours.values()) == {"learner"}, hosts
    actors = list_actors(address=cluster.dashboard_url, limit=1000, detail=True, raise_on_missing_output=False)
    nodes = {a.class_name: set() for a in actors}
    for actor in actors:
        nodes[actor.class_name].add(actor.node_id)
    assert nodes.get("TrialExecutor") == {learner_node}, nodes
    assert learner_node not in nodes.get("TaskHarness", {learner_node}), nodes  # storage stays on the head

    rows = kit.query(
        settings.database_url,
        "SELECT c.object_key, c.size_bytes, t.status FROM checkpoints c JOIN trials t ON t.id = c.trial_id "
        "JOIN task_runs r ON r.id = t.task_run_id WHERE r.submission_id = :s",
        s=sub_id,
    )
    assert len(rows) == 2 and {status for *_, status in rows} == {"succeeded"}, rows  # steps 0 and 2
    for key, size, _ in rows:  # written on the head, from bytes a host on the learner node saved
        assert len(store.get_bytes(key)) == size
    committed = kit.query(
        settings.database_url,
        "SELECT (SELECT count(*) FROM task_results WHERE submission_id = :s), "
        "(SELECT count(*) FROM events WHERE submission_id = :s AND kind = 'task.committed')",
        s=sub_id,
    )
    assert committed == [(1, 1)]
