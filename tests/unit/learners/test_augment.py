"""Batched augmentation: shapes, seeding, and that crops and flips really act."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workers.learners.augment import AugmentConfig, eval_transform, train_transform


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
    "kwargs",
    [
        {"size": 0},
        {"scale": (0.0, 1.0)},
        {"scale": (0.8, 0.5)},
        {"flip_p": 2.0},
        {"eval_crop": 0.0},
    ],
)
def test_augment_config_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        AugmentConfig(**{"size": 32, **kwargs})
