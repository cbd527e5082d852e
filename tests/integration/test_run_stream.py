"""End to end: a learner over a tiny stream on a real local Ray, on SQLite and PostgreSQL.

Checks what a user relies on: every task committed once, in order; the per-task FLOPs are
the sum of the trials' FLOPs plus the evaluation's; E is the mean over the meta-test tasks;
what ``nevis results`` reads back is what the runner wrote; checkpoints exist in the store
with their checksums.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
import time

import pytest
from sqlalchemy import func, select

from services.core.budget import RunBudget
from services.core.errors import BudgetError, LearnerError, TaskFailedError, UnknownNameError
from services.store.db import transaction
from services.store.db.models import Checkpoint, Event, Submission, TaskResult, TaskRun, Trial
from services.store.db.models_probe import ProbeJob
from services.store.objects import open_store
from services.store.probes.settings import ProbeSettings
from services.store.runs.summary import load_summary
from workers.probe.runtime.planner import enqueue_committed
from workers.stream.task_data import load_task_index
from workers.trainer.run_data import RunData
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

pytestmark = pytest.mark.usefixtures("ray_local")
# Learner-side tests run on SQLite; the two whose subject is what a task commits (or does not)
# run on both dialects.


def write_cheat_targets(folder, settings) -> None:
    """Tell the cheating learner what to try and reach: the data folder, the database, the
    store, the offline datasets, this test file; PostgreSQL's port and an outside address."""
    import json

    secret = settings.data_dir / "secret.txt"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("a file of the data folder")
    paths = [
        str(settings.data_dir),
        str(settings.data_dir / "store"),
        str(secret),
        __file__,
        str(settings.offline_data_dir or ""),
        "/etc/shadow",
        os.path.expanduser("~/.bashrc"),
    ]
    if settings.database_url.startswith("sqlite:///"):
        paths.append(settings.database_url.removeprefix("sqlite:///"))
    (folder / "nevis_cheat_targets.json").write_text(
        json.dumps({"paths": [p for p in paths if p], "ports": [["127.0.0.1", 5432], ["1.1.1.1", 53]]})
    )


def assert_sandboxed(machine: dict) -> None:
    """What the cheater found outside its task: nothing (the bubblewrap sandbox is required
    here; a machine without it fails this test with the reason)."""
    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    assert machine["targets"], "the learner found no targets file"
    assert machine["env_secrets"] == []
    assert machine["foreign_environs_with_secrets"] == []
    assert machine["visible_pids"] <= 3, machine  # the sandbox's init and the host itself
    assert machine["readable_paths"] == []
    assert machine["connected"] == []


def _summary(runner: StreamRunner, run_id: int):
    with runner.sessions() as session:
        return load_summary(session, submission_id=run_id)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_nearest_mean_runs_the_whole_stream(runner: StreamRunner, tiny_stream) -> None:
    budget = RunBudget(trials=2, steps=3, checkpoint_fractions=(0.0, 0.5, 1.0))
    run_id = runner.start(
        RunRequest(stream=str(tiny_stream), learner="nevis_test_learners:nearest_mean", budget=budget)
    )
    summary = _summary(runner, run_id)
    assert summary.status == "succeeded"
    assert [t.status for t in summary.tasks] == ["committed"] * 3
    assert [t.split for t in summary.tasks] == ["test"] * 3
    meta_test = [t.error for t in summary.tasks if t.phase == "meta_test"]
    assert summary.mean_error == pytest.approx(sum(meta_test) / len(meta_test))
    assert summary.flops_sources == ("reported",)
    with runner.sessions() as session:
        assert session.scalar(select(func.count()).select_from(TaskResult)) == 3
        for run in session.scalars(select(TaskRun)):
            trial_flops = sum(t.flops for t in run.trials)
            assert len(run.trials) == 2 and all(t.status == "succeeded" for t in run.trials)
            assert run.flops > trial_flops > 0  # evaluation FLOPs come on top
            assert run.learner_state_key
        checkpoints = session.scalars(select(Checkpoint)).all()
        assert sorted({c.step for c in checkpoints}) == [0, 2, 3]  # 0, round(1.5), 3
        assert len(checkpoints) == 3 * 2 * 3
        store = open_store(runner.settings.store_url)
        assert store.info(checkpoints[0].object_key).sha256 == checkpoints[0].sha256
        last_state = session.scalars(select(TaskRun.learner_state_key).order_by(TaskRun.id.desc())).first()
    assert pickle.loads(store.get_bytes(last_state))["tasks_seen"] == [1, 2, 3]
    # Accounting never calls the probe layer: nothing is queued at commit. The probe pool's
    # watch (its one queueing mechanism) then finds every committed checkpoint.
    with runner.sessions() as session:
        assert session.scalar(select(func.count()).select_from(ProbeJob)) == 0
    with transaction(runner.sessions) as session:
        enqueue_committed(session, settings=ProbeSettings.preset("ci"))
    with runner.sessions() as session:
        jobs = session.execute(select(ProbeJob.kind, ProbeJob.task_order)).all()
    assert sum(kind == "checkpoint" for kind, _ in jobs) == len(checkpoints)
    assert {order for kind, order in jobs if kind == "trial"} == {1, 2, 3}
    assert sum(kind == "summary" for kind, _ in jobs) == 1
    assert sum(t.flops for t in summary.tasks) == pytest.approx(summary.cflop)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_learner_cannot_reach_test_labels_or_future_tasks(runner: StreamRunner, tiny_stream, learner_dir) -> None:
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,))
    write_cheat_targets(learner_dir, runner.settings)
    run_id = runner.start(RunRequest(stream=str(tiny_stream), learner="nevis_test_learners:cheater", budget=budget))
    with runner.sessions() as session:
        key = session.scalars(select(TaskRun.learner_state_key).order_by(TaskRun.id.desc())).first()
    state = pickle.loads(open_store(runner.settings.store_url).get_bytes(key))
    cheats = state["cheats"]
    assert [c["order"] for c in cheats] == [1, 2, 3]
    for record in cheats:
        assert record["log"], "the cheating learner recorded no attempts"
        allowed = {name: outcome for name, outcome in record["log"].items() if outcome == "ALLOWED"}
        assert not allowed, f"task {record['order']}: these attempts were not refused: {allowed}"
        assert record["log"]["view.test()"] == "CausalityError"
        assert record["log"]["view.past_train(future)"] == "CausalityError"
        assert record["log"]["view.past_train('1')"] == "TypeError"
        assert record["past"] == list(range(1, record["order"])) and record["past_ok"]
        assert record["creds"] == {"NEVIS_DATABASE_URL": "", "NEVIS_STORE_URL": "", "NEVIS_DATA_DIR": ""}
        assert_sandboxed(record["machine"])
    # No array in any trial process was a test or dev-test split of any task.
    import hashlib

    from workers.stream.manifest_files import load_stream
    from workers.stream.task_data import load_task_data

    store = open_store(runner.settings.store_url)
    forbidden = set()
    for task in load_stream(str(tiny_stream)).tasks:
        data = load_task_data(store, task, image_size=16, splits=("test", "dev_test"))
        for images, labels in data.splits.values():
            forbidden |= {hashlib.sha256(a.tobytes()).hexdigest() for a in (images, labels)}
    for record in cheats:
        assert not forbidden & set(record["arrays"]), f"task {record['order']} saw held-out data"
    assert _summary(runner, run_id).status == "succeeded"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_every_trial_failing_stops_the_run_with_the_first_error(runner: StreamRunner, tiny_stream) -> None:
    budget = RunBudget(trials=2, steps=1)
    with pytest.raises(
        TaskFailedError,
        match=r"Task 1 \(shapes:shape\) failed: all 2 trials failed; first error: RuntimeError: boom on task 1",
    ):
        runner.start(RunRequest(stream=str(tiny_stream), learner="nevis_test_learners:crasher", budget=budget))
    with runner.sessions() as session:
        trials = session.scalars(select(Trial)).all()
        assert len(trials) == 2 and all(t.status == "failed" for t in trials)
        assert all("RuntimeError: boom on task 1" in t.traceback and "Traceback" in t.traceback for t in trials)
        # Charged its own report, or the floor of the CPU its host used where that is higher
        # (a host's import counts past its start allowance; on a loaded machine it can pass it).
        assert all(t.flops >= 1000 and t.flops_source in ("reported", "floor") for t in trials), [
            (t.flops, t.flops_source, t.cpu_seconds) for t in trials
        ]
        spent = sum(t.flops for t in trials)
        assert session.scalar(select(func.count()).select_from(TaskResult)) == 0
        run_ids = session.scalars(select(TaskRun.submission_id)).all()
    summary = _summary(runner, run_ids[0])
    assert summary.status == "failed" and "boom on task 1" in summary.message
    assert summary.cflop == 0 and summary.retried_flops >= spent  # the failed trials' charge is retried work


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_malformed_predictions_are_a_clear_learner_error(runner: StreamRunner, tiny_stream) -> None:
    with pytest.raises(
        TaskFailedError, match=r"LearnerError: predict\(\) must return scores shaped \(num_images, num_classes\)"
    ):
        runner.start(
            RunRequest(
                stream=str(tiny_stream), learner="nevis_test_learners:malformed", budget=RunBudget(trials=1, steps=1)
            )
        )


def test_a_failing_evaluation_fails_the_task_without_committing(runner: StreamRunner, tiny_stream) -> None:
    with pytest.raises(
        TaskFailedError, match=r"evaluating the best trial \(0\) failed: .*ValueError: cannot load my own checkpoint"
    ):
        runner.start(
            RunRequest(
                stream=str(tiny_stream),
                learner="nevis_test_learners:bad_evaluation",
                budget=RunBudget(trials=1, steps=1),
            )
        )
    with runner.sessions() as session:
        assert session.scalar(select(func.count()).select_from(TaskResult)) == 0
        run = session.scalars(select(TaskRun)).one()
        assert run.status == "failed" and "cannot load my own checkpoint" in run.error


def _kinds(runner: StreamRunner, run_id: int) -> list[str]:
    with runner.sessions() as session:
        return list(session.scalars(select(Event.kind).where(Event.submission_id == run_id).order_by(Event.id)))


def test_a_flop_cap_stops_the_run_as_the_task_reaching_it_commits(runner: StreamRunner, tiny_stream) -> None:
    """The commit of task 1 reaches the cap: the run is ``stopped`` in that transaction, with
    exactly one task run (no attempt at task 2, no failure); resuming it runs nothing."""
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,), flop_cap=1.0)
    run_id = runner.create(
        RunRequest(stream=str(tiny_stream), learner="nevis_test_learners:nearest_mean", budget=budget)
    )
    assert runner.run_next_task(run_id) is False  # no task remains: the unit of work says so at once
    summary = _summary(runner, run_id)
    assert summary.status == "stopped"
    assert summary.message.startswith("FLOP cap 1 reached (") and "spent)" in summary.message
    assert [t.status for t in summary.tasks] == ["committed", "pending", "pending"]
    with runner.sessions() as session:
        assert session.scalar(select(func.count()).select_from(TaskRun)) == 1
        assert session.scalar(select(func.count()).select_from(TaskResult)) == 1
        submission = session.get(Submission, run_id)
        assert submission.finished_at is not None and submission.cursor == 2
    kinds = _kinds(runner, run_id)
    assert kinds.count("task.started") == 1 and kinds[-2:] == ["task.committed", "submission.stopped"]
    runner.run(run_id)  # `nevis run --resume`: a stopped run is final
    assert _summary(runner, run_id).status == "stopped" and _kinds(runner, run_id) == kinds

    # Defence in depth: a run left open with its cap reached (committed by older code) is
    # stopped before its next task, without starting anything.
    with transaction(runner.sessions) as session:
        submission = session.get(Submission, run_id)
        submission.status, submission.error, submission.finished_at = "running", None, None
    assert runner.run_next_task(run_id) is False
    with runner.sessions() as session:
        submission = session.get(Submission, run_id)
        assert submission.status == "stopped" and submission.error.startswith("FLOP cap 1 reached")
        assert session.scalar(select(func.count()).select_from(TaskRun)) == 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_cap_reached_by_the_last_task_leaves_the_run_succeeded(runner: StreamRunner, tmp_path) -> None:
    from tests.integration.conftest import tiny_manifest

    stream = tiny_manifest(tmp_path / "one.json", tasks=1)
    budget = RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,), flop_cap=1.0, wall_cap_s=1e-3)
    run_id = runner.start(RunRequest(stream=str(stream), learner="nevis_test_learners:nearest_mean", budget=budget))
    summary = _summary(runner, run_id)
    assert (summary.status, summary.message) == ("succeeded", None)
    assert "submission.stopped" not in _kinds(runner, run_id)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_unknown_learner_stream_and_bad_budget(runner: StreamRunner, tiny_stream) -> None:
    with pytest.raises(UnknownNameError, match="indep"):
        runner.start(RunRequest(stream=str(tiny_stream), learner="indepp"))
    with pytest.raises(UnknownNameError, match="mini"):
        runner.start(RunRequest(stream="minii", learner="indep"))
    with pytest.raises(BudgetError, match="'trials'"):
        RunBudget(trials=0)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_task_lists_the_stream_and_rebuilds_a_shard_damaged_since_it_was_stored(
    runner: StreamRunner, tiny_stream
) -> None:
    """A task's worker (a new runner per task under the coordinator) checks the stream by
    listing it, not by re-hashing every shard (a read of the whole stream per task); a shard of
    its task damaged since the run was created is found by the read, its dataset rebuilt, and
    the task runs."""
    run_id = runner.create(
        RunRequest(
            stream=str(tiny_stream), learner="nevis_test_learners:nearest_mean", budget=RunBudget(trials=1, steps=1)
        )
    )
    hashed: list[str] = []

    def worker() -> StreamRunner:
        fresh = StreamRunner(runner.settings)
        verify = fresh.store.verify
        fresh.store.verify = lambda key: (hashed.append(key), verify(key))[1]  # type: ignore[method-assign]
        return fresh

    with worker() as first:
        plan = first.plan(run_id)
        index = load_task_index(first.store, plan.next_task(), image_size=plan.image_size)
        damaged = index.shards["dev"][0].key
        sha = first.store.info(damaged).sha256
        blob = first.store.root / "blobs" / sha[:2] / sha
        os.chmod(blob, 0o644)
        blob.write_bytes(blob.read_bytes()[::-1])  # same size: only a read's checksum sees it
        assert first.run_next_task(run_id) is True
    assert damaged in hashed  # the repair verified the stream in full
    hashed.clear()
    with worker() as second:
        assert second.run_next_task(run_id) is True
    assert hashed == []  # nothing damaged: no shard re-hashed
    assert [t.status for t in _summary(runner, run_id).tasks] == ["committed", "committed", "pending"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_tasks_worker_reads_the_tasks_data_while_its_learner_is_described(
    runner: StreamRunner, tiny_stream, monkeypatch
) -> None:
    """Both take seconds (a sandboxed host's start; a train split of up to 8 GiB), and the
    coordinator's worker for every task pays both: they overlap."""
    run_id = runner.create(
        RunRequest(
            stream=str(tiny_stream), learner="nevis_test_learners:nearest_mean", budget=RunBudget(trials=1, steps=1)
        )
    )
    seen: dict[str, float | str] = {}

    def timed(name: str, call):
        def wrapper(*args, **kwargs):
            seen[f"{name} thread"] = threading.current_thread().name
            seen[f"{name} start"] = time.monotonic()
            try:
                return call(*args, **kwargs)
            finally:
                seen[f"{name} end"] = time.monotonic()

        return wrapper

    monkeypatch.setattr(RunData, "for_task", timed("read", RunData.for_task))
    monkeypatch.setattr(StreamRunner, "learner", timed("describe", StreamRunner.learner))
    with StreamRunner(runner.settings) as worker:  # a new runner, as each task's worker process has
        assert worker.run_next_task(run_id) is True
    assert seen["read thread"] != seen["describe thread"]
    assert seen["read start"] < seen["describe end"] and seen["describe start"] < seen["read end"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_learner_that_fails_to_load_is_reported_without_waiting_for_the_tasks_data(
    runner: StreamRunner, tiny_stream, monkeypatch
) -> None:
    """The read goes on in its thread; the failure reaches the caller (who records it) first."""
    run_id = runner.create(
        RunRequest(
            stream=str(tiny_stream), learner="nevis_test_learners:nearest_mean", budget=RunBudget(trials=1, steps=1)
        )
    )
    release, reading, read = threading.Event(), threading.Event(), threading.Event()
    for_task = RunData.for_task

    def slow_read(self, *args, **kwargs):
        reading.set()
        release.wait(10)
        try:
            return for_task(self, *args, **kwargs)
        finally:
            read.set()

    def fails(self, spec, budget):
        reading.wait(30)
        raise LearnerError("the learner cannot be loaded")

    monkeypatch.setattr(RunData, "for_task", slow_read)
    monkeypatch.setattr(StreamRunner, "learner", fails)
    try:
        with StreamRunner(runner.settings) as worker, pytest.raises(LearnerError, match="cannot be loaded"):
            worker.run_next_task(run_id)
        assert not read.is_set()  # raised while the read still waited
    finally:
        release.set()
