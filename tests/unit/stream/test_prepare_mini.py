"""Preparing the ``mini`` stream: complete, idempotent, self-repairing, never short."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import DataIntegrityError, DatasetNotFoundError, ManifestError
from services.store.objects import LocalObjectStore
from workers.stream.dedup import image_hashes
from workers.stream.manifest import SPLITS, SplitRule, manifest_to_dict
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import STAGES, prepare_stream, stored_image_size, verify_stream
from workers.stream.shards import load_index
from workers.stream.task_data import load_task_data

SIZE = 32


@pytest.fixture(scope="module")
def mini():
    return load_stream("mini")


@pytest.fixture(scope="module")
def first_run(mini, tmp_path_factory):
    """The mini stream prepared once into a fresh store: (store root, report, events, indexes)."""
    root = tmp_path_factory.mktemp("mini") / "store"
    events, indexes = [], []
    report = prepare_stream(
        mini,
        LocalObjectStore(root),
        image_size=SIZE,
        offline_dir=None,
        progress=events.append,
        on_prepared=indexes.append,
    )
    return root, report, events, indexes


@pytest.fixture
def store_copy(first_run, tmp_path) -> LocalObjectStore:
    """A private copy of the prepared store, for tests that damage it."""
    shutil.copytree(first_run[0], tmp_path / "store")
    return LocalObjectStore(tmp_path / "store")


def _snapshot(store: LocalObjectStore) -> dict[str, tuple[str, int]]:
    return {k: (store.info(k).sha256, store.info(k).size) for k in store.list("")}


def test_the_first_run_prepares_every_dataset(mini, first_run):
    _, report, events, indexes = first_run
    assert [d.dataset for d in report.datasets] == list(mini.datasets)
    assert all(d.status == "prepared" for d in report.datasets)
    assert [i.dataset for i in indexes] == list(mini.datasets)
    for dataset in mini.datasets:
        assert [e.stage for e in events if e.dataset == dataset] == list(STAGES)


def test_the_first_run_follows_the_manifest_split_fractions(first_run):
    digits = first_run[1].datasets[0]
    assert digits.dataset == "sklearn:digits"
    total = sum(digits.counts.values())
    assert total == 1797 - digits.duplicates_removed
    for split, fraction in {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}.items():
        assert abs(digits.counts[split] - fraction * 1797) <= 1 + digits.duplicates_removed


def test_a_second_run_has_nothing_to_do_and_verifies_every_shard(mini, first_run, store_copy):
    before = _snapshot(store_copy)
    indexes = []
    report = prepare_stream(mini, store_copy, image_size=SIZE, offline_dir=None, on_prepared=indexes.append)
    assert report.nothing_to_do
    assert all(d.status == "present" for d in report.datasets)
    assert report.shards_verified == sum(d.num_shards for d in first_run[1].datasets)
    assert _snapshot(store_copy) == before
    assert indexes == first_run[3]  # the database hook still sees every dataset


def test_task_data_reads_back_with_no_image_in_two_splits(mini, store_copy):
    task = next(t for t in mini.tasks if t.dataset == "shapes:multi")
    data = load_task_data(store_copy, task, image_size=SIZE)
    owners = {}
    for split in SPLITS:
        images, labels = data.splits[split]
        assert images.shape[1:] == (SIZE, SIZE, 3) and labels.shape[1] == 4
        assert len(images) == data.index.counts[split]
        assert labels.sum(axis=0).min() > 0  # every label appears in every split
        for digest in image_hashes(images):
            assert owners.setdefault(digest, split) == split


def test_an_unfinished_dataset_is_rebuilt_with_the_same_bytes(mini, store_copy):
    index = load_index(store_copy, "shapes:hue", SIZE)
    store_copy.delete(index.key)  # as if the run had stopped before writing the index
    report = prepare_stream(mini, store_copy, image_size=SIZE, offline_dir=None)
    status = {d.dataset: d.status for d in report.datasets}
    assert status.pop("shapes:hue") == "rebuilt"
    assert set(status.values()) == {"present"}
    assert load_index(store_copy, "shapes:hue", SIZE) == index  # deterministic shards


def test_a_damaged_shard_is_reported_then_rebuilt(mini, store_copy):
    index = load_index(store_copy, "shapes:scale", SIZE)
    shard = index.shards["test"][0]
    blob = store_copy.root / "blobs" / shard.sha256[:2] / shard.sha256
    os.chmod(blob, 0o644)
    blob.write_bytes(b"not an npz")
    assert shard.key in verify_stream(mini, store_copy, image_size=SIZE)["shapes:scale"]
    report = prepare_stream(mini, store_copy, image_size=SIZE, offline_dir=None)
    assert {d.dataset: d.status for d in report.datasets}["shapes:scale"] == "rebuilt"
    assert set(verify_stream(mini, store_copy, image_size=SIZE).values()) == {"ok (4 shards)"}


def test_a_changed_split_rule_rebuilds_the_dataset(mini, store_copy):
    rule = SplitRule(kind="random", fractions={"train": 0.5, "dev": 0.1, "dev_test": 0.1, "test": 0.3}, seed=3)
    tasks = tuple(replace(t, split=rule) if t.dataset == "shapes:shape" else t for t in mini.tasks)
    report = prepare_stream(replace(mini, tasks=tasks), store_copy, image_size=SIZE, offline_dir=None)
    shape = next(d for d in report.datasets if d.dataset == "shapes:shape")
    assert shape.status == "rebuilt" and shape.counts["test"] == 360


def test_missing_datasets_are_all_listed_and_nothing_is_written(mini, tmp_path):
    extra = [
        replace(mini.tasks[0], order=len(mini.tasks) + i + 1, dataset=f"offline:{name}")
        for i, name in enumerate(["gone_one", "gone_two"])
    ]
    manifest = replace(mini, tasks=mini.tasks + tuple(extra))
    store = LocalObjectStore(tmp_path / "store")
    (tmp_path / "offline").mkdir()
    with pytest.raises(DatasetNotFoundError) as caught:
        prepare_stream(manifest, store, image_size=SIZE, offline_dir=tmp_path / "offline")
    message = str(caught.value)
    assert "offline:gone_one" in message and "offline:gone_two" in message
    assert "sklearn:digits" not in message
    assert f"NEVIS_OFFLINE_DATA_DIR={tmp_path / 'offline'}" in message
    assert "<name>.npz" in message and "<name>.json" in message
    assert list(store.list("")) == []


def test_one_dataset_with_two_split_rules_in_a_stream_is_refused(mini, tmp_path):
    twin = replace(
        mini.tasks[0], order=len(mini.tasks) + 1, split=SplitRule(kind="random", fractions={"train": 1.0}, seed=0)
    )
    with pytest.raises(ManifestError, match="different split rules"):
        prepare_stream(
            replace(mini, tasks=mini.tasks + (twin,)),
            LocalObjectStore(tmp_path / "s"),
            image_size=SIZE,
            offline_dir=None,
        )


@pytest.mark.parametrize(
    ("override", "explicit", "expected"),
    [(48, True, 48), (None, True, 64), (None, False, 32)],
    ids=["option", "environment", "manifest"],
)
def test_the_stored_size_comes_from_option_then_environment_then_manifest(mini, override, explicit, expected):
    assert stored_image_size(mini, settings_size=64, settings_explicit=explicit, override=override) == expected


def _one_task_manifest(mini, path: Path) -> Path:
    task = next(t for t in mini.tasks if t.dataset == "shapes:hue")
    manifest = replace(mini, name="one-task", tasks=(replace(task, order=1),))
    path.write_text(json.dumps(manifest_to_dict(manifest)))
    return path


def test_the_cli_prepares_then_has_nothing_to_do_then_verifies(mini, settings_env, tmp_path):
    stream = str(_one_task_manifest(mini, tmp_path / "one-task.json"))
    runner = CliRunner()
    first = runner.invoke(app, ["data", "prepare", "--stream", stream, "--image-size", "16"])
    assert first.exit_code == 0, first.output
    assert "prepared" in first.output and "Prepared 1 dataset" in first.output
    second = runner.invoke(app, ["data", "prepare", "--stream", stream, "--image-size", "16"])
    assert second.exit_code == 0, second.output
    assert "Nothing to do" in second.output and "4 shards verified" in second.output
    checked = runner.invoke(app, ["data", "verify", "--stream", stream, "--image-size", "16"])
    assert checked.exit_code == 0 and "All 1 datasets verified" in checked.output
    unprepared = runner.invoke(app, ["data", "verify", "--stream", stream])
    assert isinstance(unprepared.exception, DataIntegrityError)
    assert "not prepared" in unprepared.output


def test_digits_are_upscaled_to_the_task_size_as_rgb_and_their_originals_kept(mini, store_copy):
    task = next(t for t in mini.tasks if t.dataset == "sklearn:digits")
    data = load_task_data(store_copy, task, image_size=SIZE, splits=("train",), originals=("train",))
    images, labels = data.splits["train"]
    assert images.shape == (data.index.counts["train"], SIZE, SIZE, 3)
    assert np.array_equal(images[..., 0], images[..., 2])  # grey copied into each channel
    assert "PIL" in data.index.resize_method and set(labels.tolist()) == set(range(10))
    originals = data.originals["train"]  # 8x8 sources are never enlarged in storage
    assert originals.images.shape == (len(images), 8, 8, 3) and (originals.extents == 8).all()
    assert data.labelled("train").originals is originals
