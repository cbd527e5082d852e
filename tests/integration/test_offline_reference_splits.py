"""The FULL stream's reference split rules on the real offline datasets that carry (or lack)
the metadata they need: COIL-100's sidecar documents its views, so task 7 gets the
reference's view-angle split; the offline Extended YaleB has no pose, so task 21 is refused
with an error naming the field, not split at random.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DatasetFormatError
from workers.stream.adapters import AdapterContext, load_dataset
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ctx() -> AdapterContext:
    configured = os.environ.get("NEVIS_OFFLINE_DATA_DIR")
    folder = Path(configured) if configured else REPO.parent / "shared" / "datasets"
    if not (folder / "coil100.json").is_file():
        pytest.fail(f"The offline datasets are not in {folder}; set NEVIS_OFFLINE_DATA_DIR.", pytrace=False)
    return AdapterContext(offline_dir=folder)


def test_coil100_gets_the_reference_view_angle_split(ctx):
    task = load_stream("nevis22-full").tasks[6]
    raw = load_dataset(task.dataset, ctx)
    result = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes)

    assert result.counts == {"train": 500, "dev": 500, "dev_test": 500, "test": 5700}
    assert np.bincount(raw.labels[result.rows["train"]]).tolist() == [5] * 100
    views = raw.attributes["angle_bin"][result.rows["train"]]
    assert set(views.tolist()) == {70, 71, 0, 1, 2}


def test_extended_yaleb_without_poses_is_refused_naming_the_field(ctx):
    task = load_stream("nevis22-full").tasks[20]
    raw = load_dataset(task.dataset, ctx)
    with pytest.raises(DatasetFormatError, match="'pose'"):
        assign_splits(
            raw.labels,
            rule=task.split,
            given=raw.given_splits,
            attributes=raw.attributes,
            dataset=f"Dataset {task.dataset!r}",
        )
