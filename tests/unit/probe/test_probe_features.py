"""From checkpoints to features: verified bytes, checked features, LiDAR's augmented views."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import LearnerError, ProbeInputError
from services.store.objects import LocalObjectStore
from workers.learners.augment import AugmentConfig
from workers.probe.runtime.features import augmented_features, extract, load_checkpoint_bytes
from workers.sandbox.views import augment_views


@dataclass
class FlatLearner:
    """Features are the flattened pixels; optionally broken in a chosen way."""

    name: str = "flat"
    broken: str = ""

    def features(self, predictor, images, ctx):
        out = images.reshape(len(images), -1).astype(np.float32)
        if self.broken == "shape":
            return out[:, None, :]
        if self.broken == "nan":
            out[0, 0] = np.nan
        return out


@dataclass
class Predictor:
    augment: AugmentConfig | None = None


def _images(n: int = 4, size: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _checkpoint(store: LocalObjectStore, data: bytes = b"weights") -> dict:
    info = store.put_bytes("runs/1/ckpt.bin", data)
    return dict(checkpoint_id=7, object_key=info.key, sha256=info.sha256, trial_id=3, step=10)


def test_a_stored_checkpoint_comes_back_verified(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    assert load_checkpoint_bytes(store, **_checkpoint(store)) == b"weights"


def test_a_missing_checkpoint_is_named_and_permanent(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    row = _checkpoint(store)
    store.delete(row["object_key"])
    with pytest.raises(
        ProbeInputError, match=r"Checkpoint 7 \(trial 3, step 10\) is missing: no object 'runs/1/ckpt.bin'"
    ):
        load_checkpoint_bytes(store, **row)


def test_bytes_that_differ_from_the_database_record_are_corrupted(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    row = _checkpoint(store)
    store.put_bytes(row["object_key"], b"something else")  # the store's own record is consistent
    with pytest.raises(ProbeInputError, match=r"Checkpoint 7 .* is corrupted: its bytes hash to"):
        load_checkpoint_bytes(store, **row)


def test_bytes_damaged_on_disk_are_corrupted(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "store")
    row = _checkpoint(store)
    digest = hashlib.sha256(b"weights").hexdigest()
    blob = store.root / "blobs" / digest[:2] / digest
    blob.chmod(0o644)
    blob.write_bytes(b"weightz")
    with pytest.raises(ProbeInputError, match=r"is corrupted in the object store"):
        load_checkpoint_bytes(store, **row)


@pytest.mark.parametrize(("broken", "message"), [("shape", r"shaped \(num_images, d\)"), ("nan", "non-finite")])
def test_malformed_features_are_refused(broken, message) -> None:
    with pytest.raises(ProbeInputError, match=message):
        extract(FlatLearner(broken=broken), None, _images(), None)


def test_features_are_extracted_in_chunks_as_float32(monkeypatch) -> None:
    monkeypatch.setattr("workers.probe.runtime.features.EXTRACT_CHUNK", 3)
    out = extract(FlatLearner(), None, _images(7), None)
    assert out.shape == (7, 192) and out.dtype == np.float32
    np.testing.assert_array_equal(out, _images(7).reshape(7, -1))


def test_views_use_the_predictors_training_augmentation_and_are_seeded() -> None:
    images = _images()
    predictor = Predictor(AugmentConfig(size=8, scale=(0.3, 0.5), flip_p=1.0))
    views, source = augment_views(FlatLearner(), predictor, images, 3, seed=1)
    again, _ = augment_views(FlatLearner(), predictor, images, 3, seed=1)
    assert views.shape == (4, 3, 8, 8, 3) and views.dtype == np.uint8
    assert source.startswith("predictor.augment")
    np.testing.assert_array_equal(views, again)
    assert not np.array_equal(views[:, 0], views[:, 1])  # the q views differ
    assert not np.array_equal(views[:, 0], images)  # small crops always change the image


def test_views_fall_back_to_the_baselines_augmentation() -> None:
    _, source = augment_views(FlatLearner(), Predictor(None), _images(), 2, seed=0)
    assert source.startswith("fallback")


def test_a_learner_hook_decides_the_augmentation_when_present() -> None:
    class Hooked(FlatLearner):
        def augment_images(self, predictor, images, *, seed):
            return (255 - images).astype(np.uint8)

    views, source = augment_views(Hooked(), None, _images(), 2, seed=0)
    assert source == "learner.augment_images"
    np.testing.assert_array_equal(views[:, 1], 255 - _images())

    class Bad(FlatLearner):
        def augment_images(self, predictor, images, *, seed):
            return images[:1]

    with pytest.raises(LearnerError, match="augment_images"):
        augment_views(Bad(), None, _images(), 2, seed=0)


def test_augmented_features_are_shaped_for_lidar() -> None:
    feats, _ = augmented_features(
        FlatLearner(), Predictor(AugmentConfig(size=8)), _images(5), 3, None, seed=0, chunk_images=2
    )
    assert feats.shape == (5, 3, 192)
