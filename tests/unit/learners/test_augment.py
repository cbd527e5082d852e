"""Batched augmentation: shapes, seeding, and that crops and flips really act."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workers.learners.augment import AugmentConfig, crop_params, eval_transform, train_transform


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    """Random uint8 images: every pixel differs, so any geometric change shows."""
    return np.random.default_rng(1).integers(0, 256, size=(6, 32, 32, 3), dtype=np.uint8)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def normalised(images: np.ndarray, cfg: AugmentConfig) -> torch.Tensor:
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    mean = torch.tensor(cfg.mean).view(1, 3, 1, 1)
    std = torch.tensor(cfg.std).view(1, 3, 1, 1)
    return (x - mean) / std


@pytest.mark.parametrize("size", [32, 64, 24])
def test_train_and_eval_give_float_nchw_at_the_requested_size(images, size):
    cfg = AugmentConfig(size=size)
    for out in (train_transform(images, cfg, generator=gen(0)), eval_transform(images, cfg)):
        assert out.shape == (6, 3, size, size)
        assert out.dtype == torch.float32
        assert torch.isfinite(out).all()


def test_train_transform_is_fixed_by_the_generator_seed(images):
    cfg = AugmentConfig(size=32)
    a = train_transform(images, cfg, generator=gen(7))
    b = train_transform(images, cfg, generator=gen(7))
    c = train_transform(images, cfg, generator=gen(8))
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_full_crop_without_flip_is_the_identity(images):
    cfg = AugmentConfig(size=32, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0, eval_crop=1.0)
    out = train_transform(images, cfg, generator=gen(0))
    assert torch.allclose(out, normalised(images, cfg), atol=1e-5)


def test_flip_mirrors_the_image_left_to_right(images):
    cfg = AugmentConfig(size=32, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=1.0)
    out = train_transform(images, cfg, generator=gen(0))
    expected = normalised(images, cfg).flip(-1)
    assert torch.allclose(out, expected, atol=1e-5)
    assert not torch.allclose(out, normalised(images, cfg), atol=1e-2)


def test_random_crops_zoom_in_and_differ_between_images(images):
    cfg = AugmentConfig(size=32, scale=(0.35, 0.35), flip_p=0.0)
    same = np.repeat(images[:1], 4, axis=0)
    out = train_transform(same, cfg, generator=gen(3))
    assert not torch.allclose(out[0], normalised(images[:1], cfg)[0], atol=1e-2)
    assert not torch.allclose(out[0], out[1], atol=1e-2)  # independent crops per image


def test_eval_full_crop_at_the_same_size_is_exactly_the_normalised_image(images):
    cfg = AugmentConfig(size=32, eval_crop=1.0)
    assert torch.allclose(eval_transform(images, cfg), normalised(images, cfg), atol=1e-6)


def test_eval_centre_crop_keeps_the_middle(images):
    cfg = AugmentConfig(size=28, eval_crop=0.875)  # 28 of 32 px, no resize needed
    out = eval_transform(images, cfg)
    expected = normalised(images, cfg)[:, :, 2:30, 2:30]
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.equal(out, eval_transform(images, cfg))  # deterministic


def test_transforms_reject_non_uint8_or_non_rgb_input(images):
    cfg = AugmentConfig(size=32)
    with pytest.raises(TypeError, match="uint8"):
        eval_transform(images.astype(np.float32), cfg)
    with pytest.raises(ValueError, match="shaped"):
        train_transform(images[..., 0], cfg, generator=gen(0))


@pytest.mark.parametrize(
    "kwargs", [{"size": 0}, {"scale": (0.0, 1.0)}, {"scale": (0.8, 0.5)}, {"flip_p": 2.0}, {"eval_crop": 0.0}]
)
def test_augment_config_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        AugmentConfig(**{"size": 32, **kwargs})


# -- crops of the stored originals (valid extents), as the reference takes them ------------

CANVAS = 48


def raw(size: int = 16, **kwargs) -> AugmentConfig:
    """No normalisation, so outputs are pixel values in [0, 1]."""
    return AugmentConfig(size=size, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), **kwargs)


def filled(extents: np.ndarray, canvas: int = CANVAS) -> np.ndarray:
    """Canvases whose valid region is white and whose padding is black."""
    images = np.zeros((len(extents), canvas, canvas, 3), dtype=np.uint8)
    for image, (h, w) in zip(images, extents, strict=True):
        image[:h, :w] = 255
    return images


def test_the_defaults_are_the_reference_ranges_and_an_identity_evaluation(images):
    cfg = AugmentConfig(size=32)
    assert cfg.scale == (0.08, 1.0) and cfg.ratio == (3 / 4, 4 / 3) and cfg.flip_p == 0.5
    assert torch.allclose(eval_transform(images, cfg), normalised(images, cfg), atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crops_of_originals_never_read_outside_the_valid_extent(seed):
    extents = np.array([[20, 12], [48, 8], [5, 30], [48, 48], [1, 1], [17, 23]] * 4)
    out = train_transform(filled(extents), raw(), generator=gen(seed), extents=extents)
    assert out.shape == (24, 3, 16, 16)
    assert torch.allclose(out, torch.ones_like(out))  # not one padding pixel blended in


def test_crop_boxes_lie_inside_the_extent_with_area_and_aspect_in_range():
    rng = np.random.default_rng(0)
    heights = rng.integers(8, CANVAS + 1, 3000)
    extents = np.stack([heights, np.clip(heights * rng.uniform(0.4, 2.5, 3000), 8, CANVAS)], 1)
    extents = extents.astype(np.int32)
    theta = crop_params(len(extents), raw(), gen(4), extents=extents, canvas=(CANVAS, CANVAS))
    w, h = theta[:, 0, 0].abs().double() * CANVAS, theta[:, 1, 1].double() * CANVAS
    left = (theta[:, 0, 2].double() + 1) / 2 * CANVAS - w / 2
    top = (theta[:, 1, 2].double() + 1) / 2 * CANVAS - h / 2
    eh, ew = torch.from_numpy(extents[:, 0]).double(), torch.from_numpy(extents[:, 1]).double()
    eps = 1e-3
    assert (left >= -eps).all() and (left + w <= ew + eps).all()
    assert (top >= -eps).all() and (top + h <= eh + eps).all()
    area = w * h / (eh * ew)
    assert (area >= 0.08 - eps).all() and (area <= 1 + eps).all()
    assert area.min() < 0.1 and area.max() > 0.9  # the whole reference range is used
    aspect = w / h
    assert (aspect >= 3 / 4 - eps).all() and (aspect <= 4 / 3 + eps).all()
    flipped = (theta[:, 0, 0] < 0).double().mean()
    assert 0.45 < flipped < 0.55


@pytest.mark.parametrize("flip_p", [0.0, 1.0])
def test_a_whole_crop_of_an_original_is_its_valid_region_flipped_or_not(flip_p):
    rng = np.random.default_rng(2)
    canvas = rng.integers(0, 256, (3, 24, 24, 3), dtype=np.uint8)
    extents = np.full((3, 2), 16)
    out = train_transform(
        canvas, raw(16, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=flip_p), generator=gen(0), extents=extents
    )
    expected = torch.from_numpy(canvas[:, :16, :16]).permute(0, 3, 1, 2).float() / 255
    assert torch.allclose(out, expected.flip(-1) if flip_p else expected, atol=1e-5)


def test_a_crop_that_cannot_fit_falls_back_to_the_central_square():
    """No crop of the whole area with aspect 1 fits a 20 x 40 image: the reference then
    takes the central square (its evaluation view)."""
    extents = np.array([[20, 40]] * 4)
    images = np.zeros((4, CANVAS, CANVAS, 3), dtype=np.uint8)
    images[:, :20, 10:30] = 255  # the central square of the valid region
    out = train_transform(
        images, raw(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0), generator=gen(0), extents=extents
    )
    assert torch.allclose(out, torch.ones_like(out))


def test_extents_must_have_one_row_per_image(images):
    with pytest.raises(ValueError, match="extents"):
        train_transform(images, AugmentConfig(size=16), generator=gen(0), extents=np.ones((2, 2)))
