"""The meta-test consistency check: a table from image bytes to label is marked, a learner
that generalises is not, and the task's error is computed on the originals alone."""

from __future__ import annotations

import hashlib

import numpy as np
from sklearn.datasets import load_digits

from workers.trainer.consistency import SAMPLE, judge, plan_check, shift_one_pixel


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """sklearn's digits as 32×32 RGB uint8 images (each pixel a 4×4 block), and labels."""
    data = load_digits()
    grey = (data.images * (255 / 16)).astype(np.uint8)
    big = np.kron(grey, np.ones((4, 4), np.uint8))
    return np.repeat(big[..., None], 3, axis=3), data.target.astype(np.int64)


IMAGES, LABELS = _digits()
TRAIN, TEST = slice(0, 1200), slice(1200, None)


def _one_hot(classes: np.ndarray) -> np.ndarray:
    return np.eye(10)[classes]


def _lookup(images: np.ndarray) -> np.ndarray:
    """The attack: labels of every test image computed in advance, keyed by the image's bytes."""
    table = {hashlib.sha256(x.tobytes()).hexdigest(): y for x, y in zip(IMAGES[TEST], LABELS[TEST])}
    return _one_hot(np.array([table.get(hashlib.sha256(x.tobytes()).hexdigest(), 0) for x in images]))


def _nearest_centroid(images: np.ndarray) -> np.ndarray:
    """An honest learner: class means of the train images, compared at a quarter resolution."""

    def features(x: np.ndarray) -> np.ndarray:
        return x[..., 0].reshape(len(x), 8, 4, 8, 4).mean(axis=(2, 4)).reshape(len(x), -1)

    train = features(IMAGES[TRAIN].astype(float))
    means = np.stack([train[LABELS[TRAIN] == c].mean(axis=0) for c in range(10)])
    distance = ((features(images.astype(float))[:, None, :] - means[None]) ** 2).sum(axis=2)
    return -distance


def _evaluate(predict, seed: int):
    plan = plan_check(IMAGES[TEST], rng=np.random.default_rng(seed))
    scores = predict(plan.images)
    originals = plan.originals(scores)
    error = float(np.mean(originals.argmax(axis=1) != LABELS[TEST]))
    return error, judge(plan, scores, LABELS[TEST])


def test_a_lookup_table_scores_zero_on_the_originals_and_is_marked():
    for seed in range(3):
        error, check = _evaluate(_lookup, seed)
        assert error == 0.0
        assert check.checked == SAMPLE and check.flagged and check.jump > 0.5


def test_an_honest_learner_is_not_marked():
    for seed in range(3):
        error, check = _evaluate(_nearest_centroid, seed)
        assert 0.02 < error < 0.3  # it learned something, imperfectly
        assert check.checked == SAMPLE and not check.flagged and abs(check.jump) < 0.15


def test_the_learner_sees_originals_and_copies_shuffled_and_its_answers_are_put_back():
    images = IMAGES[TEST][:100]
    plan = plan_check(images, rng=np.random.default_rng(7))
    assert len(plan.images) == 100 + SAMPLE
    assert not np.array_equal(plan.images[:100], images)  # the originals are not first, in order
    index_of = {hashlib.sha256(x.tobytes()).hexdigest(): i for i, x in enumerate(plan.images)}
    scores = np.arange(len(plan.images), dtype=float)[:, None]  # each answer names its position
    back = plan.originals(scores)[:, 0].astype(int)
    assert [index_of[hashlib.sha256(x.tobytes()).hexdigest()] for x in images] == back.tolist()
    copies = plan.copies(scores)[:, 0].astype(int)
    for row, position in zip(plan.sample, copies):
        shown = plan.images[position]
        assert not np.array_equal(shown, images[row])
        assert any(
            np.array_equal(shown, shift_one_pixel(images[row : row + 1], dy, dx)[0])
            for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0))
        )


def test_a_meta_train_evaluation_or_a_tiny_split_is_left_as_it_is():
    images = IMAGES[TEST][:50]
    plain = plan_check(images, enabled=False)
    assert plain.images is images and judge(plain, _lookup(images), LABELS[TEST][:50]).jump is None
    assert len(plan_check(images[:5]).sample) == 0


def test_a_one_pixel_shift_moves_the_content_and_repeats_the_edge():
    image = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
    right = shift_one_pixel(image, 0, 1)[0, :, :, 0]
    assert right[:, 1:].tolist() == image[0, :, :3, 0].tolist() and right[:, 0].tolist() == image[0, :, 0, 0].tolist()
    up = shift_one_pixel(image, -1, 0)[0, :, :, 0]
    assert up[:3].tolist() == image[0, 1:, :, 0].tolist() and up[3].tolist() == image[0, 3, :, 0].tolist()
