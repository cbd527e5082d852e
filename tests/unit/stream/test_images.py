"""The two stored forms: aspect-preserving originals and the reference's central-square
evaluation images, on synthetic images whose content is known."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.config import Settings
from workers.stream.image_rows import ImageRows
from workers.stream.images import (
    central_square,
    check_stored_scale,
    fitted_shape,
    source_shape_summary,
    stored_forms,
    stored_side,
    to_originals,
    to_task_resolution,
)
from workers.stream.prepare import DEFAULT_STORED_SCALE


def _framed(height: int, width: int, *, inside: int, outside: int, n: int = 3) -> np.ndarray:
    """Grey images whose central square is ``inside`` and whose margins are ``outside``."""
    images = np.full((n, height, width, 1), outside, dtype=np.uint8)
    top, left, side = central_square(height, width)
    images[:, top : top + side, left : left + side] = inside
    return images


@pytest.mark.parametrize(
    ("shape", "side", "expected"),
    [((40, 80), 48, (24, 48)), ((90, 30), 48, (48, 16)), ((16, 16), 48, (16, 16)), ((112, 92), 96, (96, 79))],
    ids=["wide", "tall", "small-never-enlarged", "orl-faces"],
)
def test_originals_keep_the_aspect_ratio_with_the_long_side_fitted(shape, side, expected):
    originals = to_originals(np.zeros((2, *shape, 3), np.uint8), side)
    assert originals.images.shape == (2, *expected, 3)
    assert originals.extents.tolist() == [list(expected)] * 2
    assert abs(expected[0] / expected[1] - shape[0] / shape[1]) < 0.02
    assert fitted_shape(*shape, side) == expected


def test_originals_at_their_own_size_are_the_source_pixels_as_rgb():
    source = np.random.default_rng(0).integers(0, 256, (4, 20, 36, 1), dtype=np.uint8)
    originals = to_originals(source, 36)
    assert np.array_equal(originals.images, np.repeat(source, 3, axis=-1))


@pytest.mark.parametrize(
    "shape", [(30, 60), (61, 30), (30, 31), (32, 32)], ids=["wide", "tall-odd", "nearly-square", "square"]
)
def test_task_images_are_the_central_square_resized(shape):
    images = to_task_resolution(_framed(*shape, inside=200, outside=10), 16)
    assert images.shape == (3, 16, 16, 3)
    assert (images == 200).all()  # no margin pixel reaches the evaluation image


def test_the_central_square_floors_its_offsets_as_the_reference():
    assert central_square(30, 61) == (0, 15, 30)
    assert central_square(61, 30) == (15, 0, 30)


def test_task_images_keep_the_square_undistorted():
    """A disc in the middle of a wide image stays round (squashing would make an ellipse)."""
    yy, xx = np.mgrid[0:40, 0:120]
    disc = ((yy - 19.5) ** 2 + (xx - 59.5) ** 2 <= 15**2).astype(np.uint8) * 255
    image = to_task_resolution(disc[None, :, :, None], 40)[0, :, :, 0]
    rows, cols = np.nonzero(image > 127)
    assert abs((rows.max() - rows.min()) - (cols.max() - cols.min())) <= 1


def test_a_source_already_at_the_task_size_is_stored_unchanged():
    source = np.random.default_rng(1).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    assert np.array_equal(to_task_resolution(source, 16), source)


@pytest.mark.parametrize("scale", [0.5, 4.5, "2", True])
def test_a_stored_scale_out_of_range_is_refused_naming_the_setting(scale):
    with pytest.raises(ValueError, match=r"NEVIS_STORED_SCALE.*\[1, 4\]"):
        check_stored_scale(scale)


def test_the_stored_side_is_the_scale_times_the_task_size():
    assert stored_side(64, 1.5) == 96 and stored_side(32, 1.0) == 32


def test_the_preparer_default_is_the_settings_default():
    assert Settings.model_fields["stored_scale"].default == DEFAULT_STORED_SCALE


def test_rows_of_different_sizes_share_a_canvas_with_their_own_extents():
    wide, tall = _framed(10, 30, inside=200, outside=10, n=1)[0], _framed(30, 10, inside=90, outside=5, n=1)[0]
    rgb = np.arange(20 * 20 * 3, dtype=np.uint8).reshape(20, 20, 3)
    rows = ImageRows.from_arrays([wide, tall, rgb])
    originals = to_originals(rows, 15)
    assert originals.images.shape == (3, 15, 15, 3)  # the largest fitted height and width
    assert originals.extents.tolist() == [[5, 15], [15, 5], [15, 15]]
    assert (originals.images[0, 5:] == 0).all() and (originals.images[1, :, 5:] == 0).all()
    squares = to_task_resolution(rows, 8)
    assert (squares[0] == 200).all() and (squares[1] == 90).all()  # each its own central square
    for i, image in enumerate((wide, tall, rgb)):  # the same steps as a one-shape source
        assert np.array_equal(squares[i], to_task_resolution(image[None], 8)[0])
        height, width = originals.extents[i]
        assert np.array_equal(originals.images[i, :height, :width], to_originals(image[None], 15).images[0])
    assert source_shape_summary(rows) == {"min": [10, 10], "max": [30, 30]}


def test_both_forms_in_one_pass_read_each_row_once():
    reads = []
    image = np.full((6, 4, 3), 7, np.uint8)
    rows = ImageRows(np.array([[6, 4]] * 3), lambda i: reads.append(i) or image)
    squares, originals = stored_forms(rows, 8, 12)
    assert reads == [0, 1, 2] and squares.shape == (3, 8, 8, 3) and originals.extents.tolist() == [[6, 4]] * 3


def test_a_subset_of_rows_reads_only_its_own_rows():
    reads = []
    arrays = [np.full((2 + i, 3, 1), i, np.uint8) for i in range(5)]
    rows = ImageRows(np.array([a.shape[:2] for a in arrays]), lambda i: reads.append(i) or arrays[i])
    subset = rows.take(np.array([1, 4]))
    assert subset.shapes.tolist() == [[3, 3], [6, 3]] and len(subset) == 2
    assert [int(image[0, 0, 0]) for image in subset] == [1, 4] and reads == [1, 4]
