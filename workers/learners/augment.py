"""Batched image augmentation for the baselines, on whatever device the batch lives.

Input is always a numpy uint8 array of shape (N, H, W, 3) (the shard format); output is a
float32 tensor (N, 3, size, size), normalised with the ImageNet channel statistics.

- Training: random-resized-crop then horizontal flip, done for the whole batch at once with
  one ``affine_grid`` + ``grid_sample`` (bilinear). A crop covers a fraction of the image
  area drawn uniformly from ``scale`` (default (0.35, 1): at 32-64 px the usual 0.08 lower
  bound leaves a handful of pixels) with aspect ratio log-uniform in ``ratio``; a side that
  would exceed the image is clipped to it (instead of torchvision's retry loop), so the
  crop always lies inside the image and needs no padding.
- Evaluation: a centre crop keeping ``eval_crop`` of each side (7/8 by default, the usual
  compensation for training crops that make objects look larger), resized back to
  ``size``. ``eval_crop=1`` with inputs already at ``size`` is exactly the identity.

All randomness comes from the ``torch.Generator`` passed in, so a seed fixes the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class AugmentConfig:
    """How images are cropped, flipped and normalised.

    Attributes:
        size: side of the output images in pixels.
        scale: range of the crop's fraction of the image area (training).
        ratio: range of the crop's aspect ratio, width / height (training).
        flip_p: probability of a horizontal flip (training).
        eval_crop: fraction of each side kept by the evaluation centre crop.
        mean: per-channel mean subtracted after scaling to [0, 1].
        std: per-channel standard deviation divided by.
    """

    size: int
    scale: tuple[float, float] = (0.35, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip_p: float = 0.5
    eval_crop: float = 0.875
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(
                f"The 'size' parameter of AugmentConfig must be an int in [1, inf). "
                f"Got {self.size!r} instead."
            )
        lo, hi = self.scale
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(
                f"The 'scale' parameter of AugmentConfig must satisfy 0 < low <= high <= 1. "
                f"Got {self.scale!r} instead."
            )
        if not 0.0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(
                f"The 'ratio' parameter of AugmentConfig must satisfy 0 < low <= high. "
                f"Got {self.ratio!r} instead."
            )
        if not 0.0 <= self.flip_p <= 1.0:
            raise ValueError(
                f"The 'flip_p' parameter of AugmentConfig must be in [0, 1]. "
                f"Got {self.flip_p!r} instead."
            )
        if not 0.0 < self.eval_crop <= 1.0:
            raise ValueError(
                f"The 'eval_crop' parameter of AugmentConfig must be in (0, 1]. "
                f"Got {self.eval_crop!r} instead."
            )


def to_float(images: np.ndarray, device: str | torch.device = "cpu") -> torch.Tensor:
    """uint8 (N, H, W, 3) numpy → float32 (N, 3, H, W) in [0, 1] on ``device``.

    The uint8 array crosses to the device first (4x fewer bytes than floats).
    """
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8:
        raise TypeError(
            "Images must be a numpy uint8 array of shape (N, H, W, 3). "
            f"Got {type(images).__name__} of dtype {getattr(images, 'dtype', None)} instead."
        )
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"Images must be shaped (N, H, W, 3). Got {images.shape} instead."
        )
    batch = torch.from_numpy(np.ascontiguousarray(images)).to(device, non_blocking=True)
    return batch.permute(0, 3, 1, 2).float().div_(255.0)


def _normalise(x: torch.Tensor, cfg: AugmentConfig) -> torch.Tensor:
    mean = torch.tensor(cfg.mean, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(cfg.std, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return (x - mean) / std


def crop_params(
    n: int, cfg: AugmentConfig, generator: torch.Generator
) -> torch.Tensor:
    """Affine matrices (n, 2, 3) of random-resized-crops with flips, in grid coordinates.

    Output coordinate u in [-1, 1] reads input coordinate ±w·u + c: w the crop's side as a
    fraction of the image, c its centre, the sign a flip.
    """
    u = torch.rand((n, 5), generator=generator, dtype=torch.float64)
    lo, hi = cfg.scale
    area = lo + (hi - lo) * u[:, 0]
    log_lo, log_hi = math.log(cfg.ratio[0]), math.log(cfg.ratio[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * u[:, 1])
    w = torch.sqrt(area * aspect).clamp(max=1.0)
    h = torch.sqrt(area / aspect).clamp(max=1.0)
    cx = (1.0 - w) * (2.0 * u[:, 2] - 1.0)
    cy = (1.0 - h) * (2.0 * u[:, 3] - 1.0)
    sign = torch.where(u[:, 4] < cfg.flip_p, -1.0, 1.0).to(torch.float64)
    theta = torch.zeros((n, 2, 3), dtype=torch.float64)
    theta[:, 0, 0] = sign * w
    theta[:, 0, 2] = cx
    theta[:, 1, 1] = h
    theta[:, 1, 2] = cy
    return theta.float()


def train_transform(
    images: np.ndarray,
    cfg: AugmentConfig,
    *,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Random-resized-crop + flip + normalisation of a batch (see the module docstring).

    Args:
        images: uint8 (N, H, W, 3).
        cfg: the augmentation settings.
        generator: a CPU ``torch.Generator``; it alone decides the crops and flips.
        device: where the output lives (the work is done there).

    Returns:
        float32 (N, 3, cfg.size, cfg.size).
    """
    x = to_float(images, device)
    n = x.shape[0]
    theta = crop_params(n, cfg, generator).to(x.device)
    grid = F.affine_grid(theta, [n, 3, cfg.size, cfg.size], align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return _normalise(out, cfg)


def eval_transform(
    images: np.ndarray, cfg: AugmentConfig, *, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Centre crop of ``cfg.eval_crop`` of each side, resized to ``cfg.size``, normalised."""
    x = to_float(images, device)
    h, w = x.shape[-2:]
    if cfg.eval_crop < 1.0:
        ch, cw = max(1, round(h * cfg.eval_crop)), max(1, round(w * cfg.eval_crop))
        top, left = (h - ch) // 2, (w - cw) // 2
        x = x[:, :, top : top + ch, left : left + cw]
    if tuple(x.shape[-2:]) != (cfg.size, cfg.size):
        x = F.interpolate(
            x, size=(cfg.size, cfg.size), mode="bilinear", align_corners=False, antialias=True
        )
    return _normalise(x, cfg)


__all__ = [
    "IMAGENET_MEAN", "IMAGENET_STD", "AugmentConfig", "crop_params", "eval_transform", "to_float",
    "train_transform",
]
