"""``nevis store gc`` against a real database: referenced objects survive, old orphans go,
young orphans stay, a dry run removes nothing and reports the same, and S3 is collected too.

Ages are measured from a pinned ``now``: objects written before ``split`` are older than the
minimum age, those written after it younger, without waiting an hour.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.uncertainty import RESAMPLES, SEED
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import (
    Checkpoint,
    Dataset,
    Learner,
    Shard,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)
from services.store.db.models_probe import ProbeJob, ProbeSettingsRow
from services.store.garbage import COLLECTED_PREFIXES, collect_garbage
from services.store.key_families import FAMILIES, family_of
from services.store.key_layout import (
    checkpoint_key,
    dataset_prefix,
    prepare_log_key,
    stage_key,
    transfer_record_key,
    trial_log_key,
    trial_prefix,
    trial_state_key,
)
from services.store.objects import LocalObjectStore, ObjectStore
from services.store.objects.s3 import S3ObjectStore
from services.store.probes.object_keys import features_key
from services.store.runs.interval_cache import interval_key
from services.store.runs.predictions import predictions_key
from services.store.runs.run_keys import attempt_prefix, predictor_key

SHA = hashlib.sha256(b"x").hexdigest()
SETTINGS_HASH = "0123456789abcdef"
MIN_AGE_S = 3600.0
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

# Objects the seeded rows reference (the submission is id 1; task 1 committed, task 2 running).
CHECKPOINT = checkpoint_key(trial_prefix(attempt_prefix(1, 1, 1), 0), 5)
CHOSEN_PREDICTOR = predictor_key(1, 1, 1, 0)
STATE = trial_state_key(trial_prefix(attempt_prefix(1, 1, 1), 0))
PREDICTIONS = predictions_key(1, 1, 1)  # the committed attempt's test predictions (uncertainty)
TRANSFER = transfer_record_key(1, 1, 1)  # its transfer record, kept at commit (lives with its predictions)
KEPT_INTERVAL = interval_key(1, [(1, 1)], resamples=RESAMPLES, seed=SEED)  # E's interval over them
RUNNING = f"{attempt_prefix(1, 2, 1)}/trial-000/predictor.bin"  # no row yet: its task is running
INDEX = "datasets/shapes/shape/16px/index.json"
SHARD = "datasets/shapes/shape/16px/train-00000.npz"
BUNDLE = f"learners/bundles/{SHA}/learner.tar.gz"
PRETRAINED = f"pretrained/{SHA}.bin"
TRIAL_LOG = f"{attempt_prefix(1, 1, 1)}/trial-001/log.txt"  # a trial not chosen: its log stays while its row does
PREDICT_LOG = f"{attempt_prefix(1, 1, 1)}/predict-log.txt"
PREPARE_LOG = prepare_log_key(attempt_prefix(1, 1, 1))  # the attempt's prepare_task output
RANK_LOG = trial_log_key(trial_prefix(attempt_prefix(1, 1, 1), 1), rank=1)  # lives as long as its trial's log
FEATURES = features_key(SETTINGS_HASH, 1)  # the checkpoint job's, for its trial job
REFERENCED = (
    CHECKPOINT,
    CHOSEN_PREDICTOR,
    STATE,
    PREDICTIONS,
    TRANSFER,
    KEPT_INTERVAL,
    RUNNING,
    INDEX,
    SHARD,
    BUNDLE,
    PRETRAINED,
    TRIAL_LOG,
    PREDICT_LOG,
    PREPARE_LOG,
    RANK_LOG,
    FEATURES,
)
# Old and unreferenced: removed.
OLD_ORPHANS = (
    predictor_key(1, 1, 1, 1),  # a trial that was not chosen
    f"{attempt_prefix(7, 1, 1)}/trial-000/state.pkl",  # a deleted submission's
    f"{attempt_prefix(7, 1, 1)}/trial-000/log.txt",  # and its log
    trial_log_key(trial_prefix(attempt_prefix(7, 1, 1), 0), rank=1),  # and its other rank's
    "datasets/shapes/shape/16px/train-00009.npz",  # a shard a re-prepare no longer lists
    f"pretrained/{'1' * 64}.bin",
    features_key(SETTINGS_HASH, 999),  # a deleted checkpoint's features
)
YOUNG_ORPHANS = (
    f"learners/bundles/{'2' * 64}/new.zip",
    f"{attempt_prefix(8, 1, 1)}/trial-000/predictor.bin",
    stage_key(dataset_prefix("shapes", "shape", 16), 0, 0),
)  # a prepare still writing
OUTSIDE = "by-hand/checkpoint.bin"  # not under a prefix the service writes: never looked at


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield session_factory(engine)
    engine.dispose()


def seed_rows(sessions: sessionmaker[Session]) -> None:
    """A submission with task 1 committed (two trials, the first chosen) and task 2 running,
    a prepared dataset, an uploaded bundle and a pretrained start, and one probe job."""
    with transaction(sessions) as session:
        version = StreamVersion(name="gc", version="1", manifest_sha256=SHA, manifest={})
        learner = Learner(name="gc-learner", entrypoint="gc:learner", bundle_key=BUNDLE, bundle_sha256=SHA)
        session.add_all([version, learner])
        session.flush()
        submission = Submission(
            learner_id=learner.id,
            stream_version_id=version.id,
            phase="meta_test",
            status="running",
            budget={},
            image_size=16,
            pretrained_key=PRETRAINED,
        )
        tasks = [
            StreamTask(
                stream_version_id=version.id,
                order=order,
                year=2000 + order,
                dataset="shapes:shape",
                phase="meta_test",
                kind="single",
                num_classes=2,
                split_rule={},
            )
            for order in (1, 2)
        ]
        session.add_all([submission, *tasks])
        session.flush()
        done = TaskRun(
            submission_id=submission.id, stream_task_id=tasks[0].id, status="succeeded", learner_state_key=STATE
        )
        running = TaskRun(submission_id=submission.id, stream_task_id=tasks[1].id, status="running")
        session.add_all([done, running])
        session.flush()
        trials = [Trial(task_run_id=done.id, trial_index=i, seed=i, status="succeeded") for i in (0, 1)]
        session.add_all(trials)
        session.flush()
        checkpoint = Checkpoint(trial_id=trials[0].id, step=5, object_key=CHECKPOINT, size_bytes=1, sha256=SHA)
        session.add(checkpoint)
        session.add(
            TaskResult(
                submission_id=submission.id,
                stream_task_id=tasks[0].id,
                task_run_id=done.id,
                best_trial_id=trials[0].id,
                error=0.5,
                split="test",
                metric="accuracy",
                flops=1.0,
            )
        )
        dataset = Dataset(
            key="shapes:shape",
            image_size=16,
            kind="single",
            num_classes=2,
            index_key=INDEX,
            index_sha256=SHA,
            split_counts={},
        )
        session.add_all([dataset, ProbeSettingsRow(settings_hash=SETTINGS_HASH, settings={})])
        session.flush()
        session.add(
            Shard(
                dataset_id=dataset.id, split="train", part=0, object_key=SHARD, num_examples=1, size_bytes=1, sha256=SHA
            )
        )
        session.add(
            ProbeJob(
                job_key="checkpoint:1",
                kind="checkpoint",
                submission_id=submission.id,
                task_order=1,
                trial_id=trials[0].id,
                checkpoint_id=checkpoint.id,
                settings_hash=SETTINGS_HASH,
            )
        )
    assert submission.id == 1 and checkpoint.id == 1


def fill(store: ObjectStore) -> float:
    """Write every object (young orphans last, each with its own bytes); returns the split time."""
    for key in (*REFERENCED, *OLD_ORPHANS, OUTSIDE):
        store.put_bytes(key, f"bytes of {key}".encode())
    pause = 1.1 if isinstance(store, S3ObjectStore) else 0.05  # S3's LastModified is in whole seconds
    time.sleep(pause)
    split = time.time()
    time.sleep(pause)
    for key in YOUNG_ORPHANS:
        store.put_bytes(key, f"bytes of {key}".encode())
    return split


def stored(store: ObjectStore) -> set[str]:
    return set(store.list())


def test_referenced_and_young_objects_survive_and_old_orphans_go(sessions, tmp_path) -> None:
    seed_rows(sessions)
    store = LocalObjectStore(tmp_path / "store")
    split = fill(store)
    report = collect_garbage(store, sessions, min_age_s=MIN_AGE_S, now=split + MIN_AGE_S)
    assert stored(store) == {*REFERENCED, *YOUNG_ORPHANS, OUTSIDE}
    assert sorted(report.orphan_keys) == sorted(OLD_ORPHANS)
    assert (report.orphans, report.young) == (len(OLD_ORPHANS), len(YOUNG_ORPHANS))
    assert report.orphan_bytes == sum(len(f"bytes of {key}") for key in OLD_ORPHANS)
    by_prefix = {p.prefix: (p.objects, p.orphans, p.young) for p in report.prefixes}
    assert by_prefix == {
        "datasets": (4, 1, 1),
        "runs": (16, 4, 1),
        "pretrained": (2, 1, 0),
        "learners/bundles": (2, 0, 1),
        "probe-features": (2, 1, 0),
    }
    assert store.get_bytes(CHECKPOINT) == f"bytes of {CHECKPOINT}".encode()  # its blob is still there
    assert report.blobs is not None and report.blobs.blobs_removed == 0  # their blobs are too young yet


@SQLITE_ONLY
def test_a_dry_run_removes_nothing_and_reports_the_same_counts(sessions, tmp_path) -> None:
    seed_rows(sessions)
    store = LocalObjectStore(tmp_path / "store")
    split = fill(store)
    before = stored(store)
    dry = collect_garbage(store, sessions, min_age_s=MIN_AGE_S, now=split + MIN_AGE_S, dry_run=True)
    assert stored(store) == before and dry.dry_run and dry.blobs is None
    real = collect_garbage(store, sessions, min_age_s=MIN_AGE_S, now=split + MIN_AGE_S)
    assert (dry.prefixes, dry.orphan_keys) == (real.prefixes, real.orphan_keys)
    assert stored(store) == before - set(OLD_ORPHANS)


@SQLITE_ONLY
def test_the_local_store_frees_the_bytes_of_removed_keys(sessions, tmp_path) -> None:
    seed_rows(sessions)
    store = LocalObjectStore(tmp_path / "store")
    fill(store)
    report = collect_garbage(store, sessions, min_age_s=0)
    assert sorted(report.orphan_keys) == sorted((*OLD_ORPHANS, *YOUNG_ORPHANS))
    assert report.blobs is not None
    assert (report.blobs.blobs_removed, report.blobs.bytes_freed) == (report.orphans, report.orphan_bytes)
    assert all(store.get_bytes(key) == f"bytes of {key}".encode() for key in (*REFERENCED, OUTSIDE))


def test_every_writer_layout_is_under_a_collected_prefix() -> None:
    from workers.stream.shards import index_key

    for key in (
        index_key("shapes:shape", 16),
        predictor_key(1, 2, 3, 4),
        features_key(SETTINGS_HASH, 1),
        *REFERENCED,
        *OLD_ORPHANS,
        *YOUNG_ORPHANS,
    ):
        assert any(key.startswith(prefix + "/") for prefix in COLLECTED_PREFIXES), key
        assert family_of(key) is not None, key


# -- S3 ------------------------------------------------------------------------------------


@pytest.fixture
def s3_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[S3ObjectStore]:
    """A store in a fresh bucket of moto's S3 server over real HTTP."""
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_CONFIG_FILE", str(tmp_path / "none")),
        ("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none")),
    ):
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        bucket = f"nevis-{uuid.uuid4().hex[:16]}"
        boto3.client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"})).create_bucket(
            Bucket=bucket
        )
        yield S3ObjectStore(bucket, "nevis/gc", endpoint_url=endpoint)
    finally:
        server.stop()


@SQLITE_ONLY
def test_an_s3_store_is_collected_from_its_listing(sessions, s3_store) -> None:
    seed_rows(sessions)
    split = fill(s3_store)
    dry = collect_garbage(s3_store, sessions, min_age_s=MIN_AGE_S, now=split + MIN_AGE_S, dry_run=True)
    assert len(stored(s3_store)) == len(REFERENCED) + len(OLD_ORPHANS) + len(YOUNG_ORPHANS) + 1
    report = collect_garbage(s3_store, sessions, min_age_s=MIN_AGE_S, now=split + MIN_AGE_S)
    assert stored(s3_store) == {*REFERENCED, *YOUNG_ORPHANS, OUTSIDE}
    assert sorted(report.orphan_keys) == sorted(dry.orphan_keys) == sorted(OLD_ORPHANS)
    assert report.young == len(YOUNG_ORPHANS) and report.blobs is None


# -- the command ---------------------------------------------------------------------------


@SQLITE_ONLY
def test_nevis_store_gc_prints_the_table_and_removes_only_without_dry_run(
    settings_env, database_url, sessions, monkeypatch
) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "200")  # one line per table row, whatever the terminal
    get_settings.cache_clear()
    seed_rows(sessions)
    store = LocalObjectStore(settings_env / "store")  # the default NEVIS_STORE_URL
    fill(store)
    runner = CliRunner()
    kept = runner.invoke(app, ["store", "gc", "--dry-run"])  # everything is younger than a day
    assert kept.exit_code == 0, kept.output
    assert "Dry run: nothing was removed." in kept.output
    assert "total" in kept.output and stored(store) >= {*OLD_ORPHANS, *YOUNG_ORPHANS}
    dry = runner.invoke(app, ["store", "gc", "--dry-run", "--min-age-s", "0"])
    assert dry.exit_code == 0, dry.output
    assert "orphans to remove" in dry.output and stored(store) >= {*OLD_ORPHANS, *YOUNG_ORPHANS}
    real = runner.invoke(app, ["store", "gc", "--min-age-s", "0"])
    assert real.exit_code == 0, real.output
    orphans = len(OLD_ORPHANS) + len(YOUNG_ORPHANS)
    assert "orphans removed" in real.output and f"Local blobs: {orphans} removed" in real.output
    assert stored(store) == {*REFERENCED, OUTSIDE}
    total = next(line for line in real.output.splitlines() if line.strip().startswith("total")).split()
    assert total[1:2] + total[4:5] == [str(len(REFERENCED) + orphans), str(orphans)]  # objects, orphans


@SQLITE_ONLY
def test_a_dry_run_on_a_store_holding_every_key_family_lists_no_live_object(
    settings_env, database_url, sessions, monkeypatch
) -> None:
    # Every family that a row can keep has a live object here: a new family without one fails.
    assert {family_of(key) for key in REFERENCED} == {f for f in FAMILIES if f.references or f.kept_with}
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "200")
    get_settings.cache_clear()
    seed_rows(sessions)
    store = LocalObjectStore(settings_env / "store")
    for key in REFERENCED:
        store.put_bytes(key, key.encode())
    dry = CliRunner().invoke(app, ["store", "gc", "--dry-run", "--min-age-s", "0"])
    assert dry.exit_code == 0, dry.output
    total = next(line for line in dry.output.splitlines() if line.strip().startswith("total")).split()
    assert total[1:2] + total[4:5] == [str(len(REFERENCED)), "0"]  # objects, orphans to remove
    assert collect_garbage(store, sessions, min_age_s=0, dry_run=True).orphan_keys == ()
