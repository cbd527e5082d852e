"""Per-row attributes read from a dataset's sidecar, and the split rules that use them.

The metadata a rule needs comes from the JSON beside the npz (an ``attributes`` block, or the
documented COIL view rule); when it is absent the split stops with an error naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DatasetFormatError
from services.store.objects import LocalObjectStore
from workers.stream.adapters import AdapterContext, load_dataset
from workers.stream.manifest import SplitRule, parse_manifest
from workers.stream.prepare import prepare_stream
from workers.stream.splits import assign_splits
from workers.stream.task_data import load_task_data

COIL = SplitRule(
    kind="by_attribute",
    attribute="angle_bin",
    values={"train": (70, 71, 0, 1, 2), "dev": (16, 17, 18, 19, 20), "dev_test": (50, 51, 52, 53, 54), "test": "rest"},
)
SUBJECTS = SplitRule(
    kind="by_attribute", attribute="subject", values={"train": (1, 2), "dev": (3,), "dev_test": (4,), "test": (5,)}
)


def _write_pair(folder: Path, stem: str, n: int, meta: dict) -> None:
    images = np.zeros((n, 4, 4), dtype=np.uint8)
    labels = (np.arange(n) // 72 if n % 72 == 0 else np.arange(n) % 2).astype(np.int64)
    np.savez(folder / f"{stem}.npz", images=images, labels=labels)
    doc = {"name": stem, "class_names": [str(i) for i in range(int(labels.max()) + 1)], **meta}
    (folder / f"{stem}.json").write_text(json.dumps(doc))


def _load(folder: Path, stem: str):
    return load_dataset(f"offline:{stem}", AdapterContext(offline_dir=folder))


def test_an_attributes_list_is_read_one_value_per_row(tmp_path):
    subjects = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    _write_pair(tmp_path, "faces", 10, {"attributes": {"subject": subjects, "pose": ["a", "b"] * 5}})
    raw = _load(tmp_path, "faces")
    assert raw.attributes["subject"].tolist() == subjects
    assert raw.attributes["pose"].tolist() == ["a", "b"] * 5

    result = assign_splits(raw.labels, rule=SUBJECTS, attributes=raw.attributes)
    assert result.rows["test"].tolist() == [8, 9]
    assert result.rows["train"].tolist() == [0, 1, 2, 3]


def test_a_row_mod_attribute_gives_the_view_of_each_row(tmp_path):
    _write_pair(tmp_path, "objects", 144, {"attributes": {"angle_bin": {"row_mod": 72}}})
    raw = _load(tmp_path, "objects")
    assert raw.attributes["angle_bin"].tolist() == list(range(72)) * 2
    assert assign_splits(raw.labels, rule=COIL, attributes=raw.attributes).counts == {
        "train": 10,
        "dev": 10,
        "dev_test": 10,
        "test": 114,
    }


@pytest.mark.parametrize(
    "view_rule",
    ["the angle in degrees of row i is 5 * (i % 72)", "the view index (0..71, 5 degree steps) of row i is i % 72"],
    ids=["coil100", "coil20"],
)
def test_the_documented_coil_view_rules_give_the_angle_bin(tmp_path, view_rule):
    _write_pair(tmp_path, "coil", 144, {"view_rule": view_rule})
    assert _load(tmp_path, "coil").attributes["angle_bin"].tolist() == list(range(72)) * 2


def test_a_view_rule_in_other_words_is_not_guessed(tmp_path):
    _write_pair(tmp_path, "coil", 144, {"view_rule": "the angle of row i is 10 * (i % 36)"})
    raw = _load(tmp_path, "coil")
    assert raw.attributes == {}
    with pytest.raises(DatasetFormatError, match="'angle_bin'") as caught:
        assign_splits(raw.labels, rule=COIL, attributes=raw.attributes, dataset="Dataset 'offline:coil'")
    assert "offline:coil" in str(caught.value) and '"attributes"' in str(caught.value)


def test_a_sidecar_without_the_attribute_stops_the_split_naming_it(tmp_path):
    _write_pair(tmp_path, "faces", 10, {"attributes": {"pose": ["a"] * 10}})
    raw = _load(tmp_path, "faces")
    with pytest.raises(DatasetFormatError, match="'subject'.*attributes it has: pose"):
        assign_splits(raw.labels, rule=SUBJECTS, attributes=raw.attributes)


@pytest.mark.parametrize(
    ("attributes", "match"),
    [
        ({"subject": [1, 2, 3]}, "one value per row"),
        ({"subject": [1, "a"] * 5}, "only ints or only strings"),
        ({"subject": [True] * 10}, "only ints or only strings"),
        ({"angle_bin": {"row_mod": 0}}, "row_mod"),
        ({"angle_bin": {"every": 72}}, "row_mod"),
        (["subject"], "'attributes' must be an object"),
    ],
    ids=["wrong-length", "mixed-types", "booleans", "zero-cycle", "unknown-form", "not-object"],
)
def test_a_malformed_attributes_block_names_the_problem(tmp_path, attributes, match):
    _write_pair(tmp_path, "faces", 10, {"attributes": attributes})
    with pytest.raises(DatasetFormatError, match=match):
        _load(tmp_path, "faces")


def _stream(rule: dict) -> dict:
    return {
        "format": 1,
        "name": "attr",
        "version": "1",
        "description": "d",
        "source": "t",
        "meta_test_from_year": 2019,
        "tasks": [
            {"order": 1, "year": 2001, "dataset": "offline:coil", "title": "COIL", "kind": "single", "split": rule}
        ],
    }


COIL_DOC = {
    "kind": "by_attribute",
    "attribute": "angle_bin",
    "values": {
        "train": [70, 71, 0, 1, 2],
        "dev": [16, 17, 18, 19, 20],
        "dev_test": [50, 51, 52, 53, 54],
        "test": "rest",
    },
}


def _noisy_pair(folder: Path, meta: dict) -> None:
    """144 distinct images (no duplicates for dedup to remove), 72 views of 2 objects."""
    images = np.random.RandomState(0).randint(0, 256, size=(144, 8, 8), dtype=np.uint8)
    np.savez(folder / "coil.npz", images=images, labels=np.repeat(np.arange(2), 72))
    (folder / "coil.json").write_text(json.dumps({"class_names": ["a", "b"], **meta}))


def test_prepare_takes_the_attribute_from_the_sidecar_into_the_split(tmp_path):
    _noisy_pair(tmp_path, {"view_rule": "the angle in degrees of row i is 5 * (i % 72)"})
    manifest = parse_manifest(_stream(COIL_DOC), origin="attr.json")
    store = LocalObjectStore(tmp_path / "store")
    prepare_stream(manifest, store, image_size=8, offline_dir=tmp_path)

    data = load_task_data(store, manifest.tasks[0], image_size=8)
    assert {s: len(data.splits[s][1]) for s in data.splits} == {"train": 10, "dev": 10, "dev_test": 10, "test": 114}


def test_prepare_without_the_attribute_stops_naming_the_dataset_and_field(tmp_path):
    _noisy_pair(tmp_path, {})
    manifest = parse_manifest(_stream(COIL_DOC), origin="attr.json")
    with pytest.raises(DatasetFormatError, match="'offline:coil'.*'angle_bin'"):
        prepare_stream(manifest, LocalObjectStore(tmp_path / "store"), image_size=8, offline_dir=tmp_path)
