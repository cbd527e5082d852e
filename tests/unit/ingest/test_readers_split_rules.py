"""Each converted fixture carries what its streams' split rules need: the per-row attributes
and official splits named by every NEVIS'22 task that reads the source, so ``nevis data
prepare`` can split it (checked with the same ``assign_splits`` it calls)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.source_fixtures import class_folders
from tests.support.source_fixtures.brodatz import write_brodatz
from tests.support.source_fixtures.caltech101 import write_caltech101
from tests.support.source_fixtures.cifar_binary import write_cifar10, write_cifar100
from tests.support.source_fixtures.coil100 import write_coil100
from tests.support.source_fixtures.converted import convert_and_load
from tests.support.source_fixtures.extended_yaleb import write_extended_yaleb
from tests.support.source_fixtures.idx_sources import write_idx_source
from tests.support.source_fixtures.idx_variants import write_emnist_balanced, write_mnist_rotation
from tests.support.source_fixtures.lfw import write_lfw
from tests.support.source_fixtures.mnist_m import write_mnist_m
from tests.support.source_fixtures.tables import write_landsat, write_path_mnist, write_semeion
from tests.support.source_fixtures.usps import write_usps
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits

WRITERS: dict[str, Callable[[Path], Any]] = {
    "mnist": lambda d: write_idx_source(d, "mnist", train=12, test=3),
    "fashion_mnist": lambda d: write_idx_source(d, "fashion_mnist", train=12, test=3),
    "cifar10": write_cifar10,
    "cifar100": write_cifar100,
    "usps": write_usps,
    "coil100": write_coil100,
    "brodatz": write_brodatz,
    "mnist_m": write_mnist_m,
    "lfw": write_lfw,
    "caltech101": write_caltech101,
    "sketch": class_folders.write_sketch,
    "scenes15": class_folders.write_scenes15,
    "caltech256": class_folders.write_caltech256,
    "ig02": class_folders.write_ig02,
    "uiuc_cars": class_folders.write_uiuc_cars,
    "emnist_balanced": write_emnist_balanced,
    "mnist_rotation": write_mnist_rotation,
    "semeion": write_semeion,
    "landsat": write_landsat,
    "path_mnist": write_path_mnist,
    "extended_yaleb": write_extended_yaleb,
}


def _tasks(key: str) -> list[Any]:
    tasks = [
        t
        for stream in ("nevis22-short", "nevis22-full")
        for t in load_stream(stream).tasks
        if t.dataset == f"nevis:{key}"
    ]
    assert tasks, f"no NEVIS'22 task reads {key}"
    return tasks


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_every_task_of_the_source_can_split_the_converted_rows(tmp_path: Path, key: str) -> None:
    WRITERS[key](tmp_path / "data")
    raw = convert_and_load(key, tmp_path)
    for task in _tasks(key):
        assignment = assign_splits(
            raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes, dataset=task.dataset
        )
        placed = sum(len(rows) for rows in assignment.rows.values())
        assert 0 < placed <= raw.num_examples, (task.order, assignment.how)
