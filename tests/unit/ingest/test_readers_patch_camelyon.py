"""The PatchCamelyon reader on gzipped HDF5 fixtures, with blocks smaller than a part so a part
spans several: patches, labels and the official train / valid / test, through ``nevis:``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.source_fixtures.converted import convert_and_load, image, split_of
from tests.support.source_fixtures.patch_camelyon import write_patch_camelyon
from workers.ingest.readers import patch_camelyon
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits


def test_patches_labels_and_splits_come_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patch_camelyon, "BLOCK", 4)
    parts = write_patch_camelyon(tmp_path / "data")
    raw = convert_and_load("patch_camelyon", tmp_path)
    assert split_of(raw) == ["train"] * 10 + ["val"] * 3 + ["test"] * 2
    assert raw.labels.tolist() == [v for p in ("train", "valid", "test") for v in parts[p][1].tolist()]
    assert np.array_equal(image(raw, 9), parts["train"][0][9])
    assert np.array_equal(image(raw, 14), parts["test"][0][1])
    task = next(t for t in load_stream("nevis22-full").tasks if t.dataset == "nevis:patch_camelyon")
    rows = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes).rows
    assert rows["dev_test"].tolist() == [10, 11, 12] and rows["test"].tolist() == [13, 14]
