"""Images of different sizes, end to end, on each path a source can take (a Parquet dataset, an
image folder): 120x40 and 40x120 images reach the learner's task view with their true extents,
and every stored evaluation image is the reference's input (the central square of the SOURCE
image, resized), computed here independently with Pillow."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.store.objects import LocalObjectStore
from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset
from workers.stream.manifest import SPLITS, manifest_to_dict
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream
from workers.stream.shards import load_index
from workers.stream.task_data import load_task_data
from workers.stream.task_info import LabelledData, task_info
from workers.stream.task_view import CausalTaskView

SIZE = 32
N = 20  # half 120 wide x 40 high, half 40 wide x 120 high
WIDE, TALL = (40, 120), (120, 40)  # (height, width)


def _sources() -> list[np.ndarray]:
    rng = np.random.RandomState(7)
    return [rng.randint(0, 256, size=(*(WIDE if k % 4 < 2 else TALL), 3), dtype=np.uint8) for k in range(N)]


def _label(k: int) -> int:
    return k % 2  # each class holds both orientations


def reference_square(source: np.ndarray, size: int) -> np.ndarray:
    """The reference's evaluation input: the central square (side = shorter side, offsets
    floored), resized to size x size (bilinear)."""
    height, width = source.shape[:2]
    side = min(height, width)
    top, left = (height - side) // 2, (width - side) // 2
    square = Image.fromarray(source).crop((left, top, left + side, top + side))
    return np.asarray(square.resize((size, size), Image.Resampling.BILINEAR))


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _as_parquet(folder: Path, sources: list[np.ndarray]) -> str:
    rows = (ImageRow(_png(s) if k % 2 else s, _label(k)) for k, s in enumerate(sources))
    write_parquet_dataset(rows, folder / "mixed.parquet", class_names=("a", "b"), row_group_rows=3)
    return "parquet:mixed"


def _as_image_folder(folder: Path, sources: list[np.ndarray]) -> str:
    for k, source in enumerate(sources):
        class_dir = folder / "mixed" / "ab"[_label(k)]
        class_dir.mkdir(parents=True, exist_ok=True)
        Image.fromarray(source).save(class_dir / f"{k:02d}.png")
    return "images:mixed"


@pytest.fixture(params=[_as_parquet, _as_image_folder], ids=["parquet", "image_folder"])
def dataset(request, tmp_path: Path) -> tuple[str, Path]:
    folder = tmp_path / "offline"
    folder.mkdir()
    return request.param(folder, _sources()), folder


def _manifest(dataset_key: str):
    mini = load_stream("mini")
    task = replace(mini.tasks[0], order=1, dataset=dataset_key, num_classes=2)
    return replace(mini, name="mixed", tasks=(task,))


def _prepared(dataset_key: str, folder: Path, store_root: Path, scale: float):
    manifest = _manifest(dataset_key)
    task = manifest.tasks[0]
    store = LocalObjectStore(store_root)
    prepare_stream(manifest, store, image_size=SIZE, offline_dir=folder, stored_scale=scale)
    return task, store


def _learner_view(task, store) -> CausalTaskView:
    """The view a learner gets: the runner's read, sent as the host's wire carries it."""
    data = load_task_data(store, task, image_size=SIZE, splits=("train", "dev"), originals=("train",))
    train = LabelledData.from_arrays(data.labelled("train").to_arrays())
    dev = LabelledData.from_arrays(data.labelled("dev").to_arrays())
    return CausalTaskView(task_info(task, data.index, SIZE), train, dev, {}, lambda o: train, 1)


def _source_of(image: np.ndarray, expected: list[np.ndarray]) -> int:
    matches = [k for k, e in enumerate(expected) if np.array_equal(image, e)]
    assert len(matches) == 1, "a stored image is not the central square of exactly one source"
    return matches[0]


# At scale 4 the stored side (128) holds the sources whole; at 1.5 (48) they are fitted to it.
@pytest.mark.parametrize(
    ("scale", "stored"), [(4.0, {WIDE: WIDE, TALL: TALL}), (1.5, {WIDE: (16, 48), TALL: (48, 16)})]
)
def test_mixed_sizes_reach_the_learner_whole_and_evaluation_sees_the_source_square(dataset, tmp_path, scale, stored):
    key, folder = dataset
    sources = _sources()
    expected = [reference_square(s, SIZE) for s in sources]
    task, store = _prepared(key, folder, tmp_path / "store", scale)

    view = _learner_view(task, store)
    train = view.train()
    assert train.images.shape[1:] == (SIZE, SIZE, 3)
    extents = [tuple(e) for e in train.originals.extents.tolist()]
    assert set(extents) == {stored[WIDE], stored[TALL]}  # both orientations, aspect kept
    for image, original, extent, label in zip(train.images, train.originals.images, extents, train.labels, strict=True):
        k = _source_of(image, expected)
        assert extent == stored[sources[k].shape[:2]] and label == _label(k)
        if scale == 4.0:  # the learner crops from the source itself, not a squashed copy
            assert np.array_equal(original[: extent[0], : extent[1]], sources[k])

    data = load_task_data(store, task, image_size=SIZE)  # what the harness scores
    seen = [_source_of(image, expected) for split in SPLITS for image in data.splits[split][0]]
    assert sorted(seen) == list(range(N))  # every source once, nothing squashed or lost
    test_sources = {sources[_source_of(i, expected)].shape[:2] for i in data.splits["test"][0]}
    assert test_sources == {WIDE, TALL}


def test_a_squashed_copy_would_not_pass():
    """The check above can fail: squashing to a square gives another evaluation image."""
    source = _sources()[0]
    squashed = np.asarray(Image.fromarray(source).resize((SIZE, SIZE), Image.Resampling.BILINEAR))
    assert not np.array_equal(squashed, reference_square(source, SIZE))


def test_nevis_data_prepare_reads_a_parquet_dataset_by_its_nevis_name(settings_env, tmp_path, monkeypatch):
    folder = tmp_path / "offline"
    folder.mkdir()
    _as_parquet(folder, _sources())
    stream = tmp_path / "mixed.json"
    stream.write_text(json.dumps(manifest_to_dict(_manifest("nevis:mixed"))))
    monkeypatch.setenv("NEVIS_OFFLINE_DATA_DIR", str(folder))
    get_settings.cache_clear()
    result = CliRunner().invoke(app, ["data", "prepare", "--stream", str(stream), "--image-size", str(SIZE)])
    assert result.exit_code == 0, result.output
    index = load_index(LocalObjectStore(settings_env / "store"), "nevis:mixed", SIZE)
    assert index.source["file"] == "mixed.parquet" and sum(index.counts.values()) == N
    assert index.source["original_shape"] == {"min": [40, 40], "max": [120, 120]}
