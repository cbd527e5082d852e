"""What a learner gets: task-resolution images by default, the stored originals on request."""

from __future__ import annotations

import numpy as np
import pytest

from workers.stream.task_info import LabelledData, Originals, TaskInfo
from workers.stream.task_view import CausalTaskView


def _originals(n: int) -> Originals:
    images = np.arange(n * 6 * 10 * 3, dtype=np.int64).astype(np.uint8).reshape(n, 6, 10, 3)
    return Originals(images, np.tile(np.array([[6, 10]], np.int32), (n, 1)))


def _data(n: int, *, originals: bool) -> LabelledData:
    images = np.full((n, 4, 4, 3), 7, np.uint8)
    return LabelledData(images, np.arange(n), _originals(n) if originals else None)


def _info() -> TaskInfo:
    return TaskInfo(
        order=1,
        key="001-x",
        dataset="shapes:shape",
        title="t",
        year=2001,
        domain=None,
        kind="single",
        num_classes=2,
        class_names=("a", "b"),
        image_size=4,
        num_train=5,
        num_dev=2,
    )


def test_crop_source_gives_the_originals_and_their_extents_where_sent():
    data = _data(5, originals=True)
    images, extents = data.crop_source(np.array([3, 1]))
    assert np.array_equal(images, data.originals.images[[3, 1]])
    assert extents.tolist() == [[6, 10], [6, 10]]


def test_crop_source_falls_back_to_the_whole_task_images_without_originals():
    data = _data(5, originals=False)
    images, extents = data.crop_source(np.array([0, 4]))
    assert images.shape == (2, 4, 4, 3) and extents is None


@pytest.mark.parametrize("originals", [True, False], ids=["with", "without"])
def test_a_split_survives_the_wire_arrays(originals):
    data = _data(3, originals=originals)
    back = LabelledData.from_arrays(data.to_arrays())
    assert np.array_equal(back.images, data.images) and np.array_equal(back.labels, data.labels)
    if originals:
        assert np.array_equal(back.originals.images, data.originals.images)
        assert np.array_equal(back.originals.extents, data.originals.extents)
    else:
        assert back.originals is None


def test_the_view_hands_out_task_images_with_originals_beside_them():
    train, dev = _data(5, originals=True), _data(2, originals=False)
    view = CausalTaskView(_info(), train, dev, {}, lambda o: train, stream_length=1)
    assert view.train().images.shape == (5, 4, 4, 3)  # the reference's evaluation input
    assert view.train().originals.images.shape == (5, 6, 10, 3)
    assert view.dev().originals is None


@pytest.mark.parametrize(
    ("images", "extents", "message"),
    [
        (np.zeros((2, 6, 10, 1), np.uint8), np.ones((2, 2), np.int32), "uint8"),
        (np.zeros((2, 6, 10, 3), np.uint8), np.ones((3, 2), np.int32), r"shape \(2, 2\)"),
        (np.zeros((2, 6, 10, 3), np.uint8), np.array([[6, 11], [6, 10]]), "canvas"),
        (np.zeros((2, 6, 10, 3), np.uint8), np.array([[0, 10], [6, 10]]), "canvas"),
    ],
    ids=["grey", "rows", "too-wide", "empty"],
)
def test_originals_refuse_inconsistent_arrays(images, extents, message):
    with pytest.raises(ValueError, match=message):
        Originals(images, extents)
