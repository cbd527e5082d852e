"""The database itself refuses bad rows: duplicate results, unknown statuses, edits to events.

Each test runs on SQLite and on PostgreSQL (see ``database_url`` in tests/conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from services.store.db import models
from services.store.db.engine import session_factory, transaction
from services.store.db.models import (
    Checkpoint,
    Dataset,
    Event,
    Learner,
    Shard,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)

SHA = "ab" * 32


@dataclass(frozen=True)
class Graph:
    """Ids of one submission with a run, two trials and a checkpoint on task 1 of 2."""

    version: int
    tasks: tuple[int, int]
    learner: int
    submission: int
    run: int
    trials: tuple[int, int]
    dataset: int


@pytest.fixture
def sessions(db_engine: Engine) -> sessionmaker[Session]:
    return session_factory(db_engine)


@pytest.fixture
def graph(sessions: sessionmaker[Session]) -> Graph:
    with transaction(sessions) as s:
        version = StreamVersion(name="mini", version="1", manifest_sha256=SHA, manifest={})
        tasks = [
            StreamTask(
                stream_version=version,
                order=i,
                year=2000 + i,
                dataset=f"sklearn:t{i}",
                phase="meta_train",
                kind="single",
                num_classes=10,
                domain=None,
                split_rule={"kind": "random"},
            )
            for i in (1, 2)
        ]
        learner = Learner(name="linear", entrypoint="pkg:Learner")
        submission = Submission(learner=learner, stream_version=version, phase="meta_train", image_size=64)
        run = TaskRun(submission=submission, stream_task=tasks[0], status="running")
        trials = [Trial(task_run=run, trial_index=i, seed=i, config={"lr": 0.1}) for i in (0, 1)]
        checkpoint = Checkpoint(trial=trials[0], step=10, object_key="c/1", size_bytes=3, sha256=SHA)
        dataset = Dataset(
            key="sklearn:digits",
            image_size=64,
            kind="single",
            num_classes=10,
            index_key="d/index.json",
            index_sha256=SHA,
            split_counts={"train": 1},
            shards=[Shard(split="train", part=0, object_key="d/0", num_examples=1, size_bytes=1, sha256=SHA)],
        )
        s.add_all([version, learner, submission, run, checkpoint, dataset, *tasks, *trials])
        s.flush()
        return Graph(
            version.id,
            (tasks[0].id, tasks[1].id),
            learner.id,
            submission.id,
            run.id,
            (trials[0].id, trials[1].id),
            dataset.id,
        )


def _result(g: Graph, **overrides: object) -> TaskResult:
    values = dict(
        submission_id=g.submission,
        stream_task_id=g.tasks[0],
        task_run_id=g.run,
        best_trial_id=g.trials[0],
        error=0.25,
        split="dev_test",
        metric="accuracy",
        flops=1e9,
    )
    values.update(overrides)
    return TaskResult(**values)


def _count(sessions: sessionmaker[Session], model: type) -> int:
    with sessions() as s:
        return s.scalar(select(func.count()).select_from(model))


def _refused(sessions: sessionmaker[Session], *statements: object) -> None:
    """Assert the database rejects the statements (or added rows) as one transaction."""
    with pytest.raises(IntegrityError):
        with transaction(sessions) as s:
            for statement in statements:
                if isinstance(statement, models.Base):
                    s.add(statement)
                    s.flush()
                else:
                    s.execute(statement)


def test_a_result_is_committed_once(sessions: sessionmaker[Session], graph: Graph) -> None:
    with transaction(sessions) as s:
        s.add(_result(graph))
    _refused(sessions, _result(graph, error=0.1, best_trial_id=graph.trials[1]))
    assert _count(sessions, TaskResult) == 1


def test_a_second_attempt_cannot_add_a_second_result(sessions: sessionmaker[Session], graph: Graph) -> None:
    with transaction(sessions) as s:
        s.add(_result(graph))
        s.execute(update(TaskRun).values(status="failed"))
        retry = TaskRun(submission_id=graph.submission, stream_task_id=graph.tasks[0], attempt=2)
        s.add(retry)
        s.flush()
        trial = Trial(task_run_id=retry.id, trial_index=0, seed=0)
        s.add(trial)
        s.flush()
        retry_ids = (retry.id, trial.id)
    _refused(sessions, _result(graph, task_run_id=retry_ids[0], best_trial_id=retry_ids[1]))


def test_a_result_must_come_from_a_run_of_its_own_task(sessions: sessionmaker[Session], graph: Graph) -> None:
    _refused(sessions, _result(graph, stream_task_id=graph.tasks[1]))


def test_the_best_trial_must_belong_to_the_run(sessions: sessionmaker[Session], graph: Graph) -> None:
    with transaction(sessions) as s:
        other_run = TaskRun(submission_id=graph.submission, stream_task_id=graph.tasks[1])
        s.execute(update(TaskRun).values(status="succeeded"))
        s.add(other_run)
        s.flush()
        stray = Trial(task_run_id=other_run.id, trial_index=0, seed=0)
        s.add(stray)
        s.flush()
        stray_id = stray.id
    _refused(sessions, _result(graph, best_trial_id=stray_id))


@pytest.mark.parametrize(
    ("model", "column", "allowed"),
    [
        (Submission, "status", models.SUBMISSION_STATUSES),
        (Submission, "phase", models.PHASES),
        (TaskRun, "status", models.TASK_RUN_STATUSES),
        (Trial, "status", models.TRIAL_STATUSES),
        (Trial, "flops_source", models.FLOPS_SOURCES),
        (StreamTask, "phase", models.PHASES),
        (StreamTask, "kind", models.TASK_KINDS),
        (Dataset, "kind", models.TASK_KINDS),
        (Shard, "split", models.SHARD_SPLITS),
    ],
)
def test_closed_vocabularies_accept_their_values_and_nothing_else(
    sessions: sessionmaker[Session], graph: Graph, model: type, column: str, allowed: tuple
) -> None:
    with transaction(sessions) as s:
        for value in allowed:
            s.execute(update(model).values({column: value}))
    _refused(sessions, update(model).values({column: "bogus"}))


@pytest.mark.parametrize(("column", "bad"), [("split", "train"), ("metric", "auc"), ("error", 1.5), ("flops", -1.0)])
def test_results_with_bad_values_are_refused(
    sessions: sessionmaker[Session], graph: Graph, column: str, bad: object
) -> None:
    _refused(sessions, _result(graph, **{column: bad}))


@pytest.mark.parametrize(
    "statement",
    [
        update(Trial).values(flops=-5.0),
        update(Trial).values(dev_error=2.0),
        update(TaskRun).values(attempt=0),
        update(Submission).values(cursor=0),
        update(Checkpoint).values(sha256="abc"),
        update(Learner).values(bundle_key="bundles/x.zip"),
    ],
    ids=["negative-flops", "dev-error", "attempt-0", "cursor-0", "short-sha256", "unchecksummed"],
)
def test_out_of_range_values_are_refused(sessions: sessionmaker[Session], graph: Graph, statement: object) -> None:
    _refused(sessions, statement)


def test_only_one_active_run_per_submission(sessions: sessionmaker[Session], graph: Graph) -> None:
    _refused(sessions, TaskRun(submission_id=graph.submission, stream_task_id=graph.tasks[1]))
    with transaction(sessions) as s:
        s.execute(update(TaskRun).values(status="succeeded"))
        s.add(TaskRun(submission_id=graph.submission, stream_task_id=graph.tasks[1]))
    assert _count(sessions, TaskRun) == 2


@pytest.mark.parametrize("statement", [update(Event).values(kind="edited"), delete(Event)], ids=["update", "delete"])
def test_events_are_append_only(sessions: sessionmaker[Session], graph: Graph, statement: object) -> None:
    with transaction(sessions) as s:
        s.add(Event(submission_id=graph.submission, kind="submitted", payload={"by": "test"}))
        s.add(Event(kind="system", payload={}))
    _refused(sessions, statement)
    with sessions() as s:
        assert s.scalars(select(Event.kind).order_by(Event.id)).all() == ["submitted", "system"]


def test_events_cannot_be_truncated(sessions: sessionmaker[Session], db_engine: Engine) -> None:
    with transaction(sessions) as s:
        s.add(Event(kind="system", payload={}))
    if db_engine.dialect.name == "sqlite":
        # SQLite has no TRUNCATE (its "truncate optimisation" is a plain DELETE, refused
        # above): the statement itself is an error, and the row stays.
        with pytest.raises(OperationalError, match="syntax error"), transaction(sessions) as s:
            s.execute(text("TRUNCATE events"))
    else:
        _refused(sessions, text("TRUNCATE events"))
    assert _count(sessions, Event) == 1


def test_deleting_a_submission_removes_its_runs_trials_checkpoints_and_results(
    sessions: sessionmaker[Session], graph: Graph
) -> None:
    with transaction(sessions) as s:
        s.add(_result(graph))
    with transaction(sessions) as s:
        s.execute(delete(Submission))
    for model in (TaskRun, Trial, Checkpoint, TaskResult):
        assert _count(sessions, model) == 0, model.__name__
    assert _count(sessions, Learner) == 1


def test_a_submission_with_an_audit_trail_cannot_be_deleted(sessions: sessionmaker[Session], graph: Graph) -> None:
    with transaction(sessions) as s:
        s.add(Event(submission_id=graph.submission, kind="submitted", payload={}))
    _refused(sessions, delete(Submission))
    assert _count(sessions, Trial) == 2


@pytest.mark.parametrize("model", [Learner, StreamVersion], ids=["learner", "stream-version"])
def test_a_learner_or_stream_in_use_cannot_be_deleted(
    sessions: sessionmaker[Session], graph: Graph, model: type
) -> None:
    _refused(sessions, delete(model))


def test_deleting_unused_stream_versions_and_datasets_removes_their_parts(
    sessions: sessionmaker[Session], graph: Graph
) -> None:
    with transaction(sessions) as s:
        s.execute(delete(Submission))
        s.execute(delete(StreamVersion))
        s.execute(delete(Dataset))
    assert (_count(sessions, StreamTask), _count(sessions, Shard)) == (0, 0)


@pytest.mark.parametrize(
    "duplicate",
    [
        lambda g: StreamVersion(name="mini", version="1", manifest_sha256=SHA, manifest={}),
        lambda g: StreamTask(
            stream_version_id=g.version, order=1, year=1, dataset="x", phase="meta_test", kind="multi", split_rule={}
        ),
        lambda g: Shard(
            dataset_id=g.dataset, split="train", part=0, object_key="o", num_examples=0, size_bytes=0, sha256=SHA
        ),
        lambda g: Trial(task_run_id=g.run, trial_index=1, seed=9),
        lambda g: Checkpoint(trial_id=g.trials[0], step=10, object_key="k", size_bytes=0, sha256=SHA),
        lambda g: Learner(name="linear", entrypoint="other:Learner"),
    ],
    ids=["stream-version", "task-order", "shard", "trial-index", "checkpoint-step", "learner"],
)
def test_natural_keys_are_unique(sessions: sessionmaker[Session], graph: Graph, duplicate) -> None:
    _refused(sessions, duplicate(graph))
