"""Batched image augmentation for the baselines, on whatever device the batch lives.

Input is always a numpy uint8 array of shape (N, H, W, 3) (the shard format); output is a
float32 tensor (N, 3, size, size) scaled to [-1, 1] as the reference does (x / 127.5 - 1).

- Training, as the reference's ``random_crop_via_cropped_window_and_resize`` then
  ``random_flip`` (dm_nevis ``experiments_jax/training/augmentations.py``): a crop of each
  image's valid extent (the stored originals, ``extents`` from
  :class:`~workers.stream.task_info.Originals`; the whole image without them) covering a
  fraction of its area drawn uniformly from ``scale`` (0.08, 1) with aspect ratio
  log-uniform in ``ratio`` (3/4, 4/3); up to ``ATTEMPTS`` (10) draws per image, the first
  that fits is used, and if none fits the central square is (the reference's fallback). The
  crop is resized to ``size`` and flipped, for the whole batch at once with one
  ``affine_grid`` + ``grid_sample`` (bilinear, not antialiased, like ``tf.image.resize``);
  samples are clamped to the valid extent, so padding is never read.
- Evaluation: the inputs are already the reference's evaluation images (the central square
  at the task resolution, see :mod:`workers.stream.images`), so with the default
  ``eval_crop=1`` at ``size`` this is normalisation only. ``eval_crop < 1`` keeps a centre
  crop of that share of each side, resized back to ``size`` (predictors saved before format
  2 of the shards carry 0.875).

All randomness comes from the ``torch.Generator`` passed in, so a seed fixes the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

# The reference scales pixels to [-1, 1] (x / 127.5 - 1), not by ImageNet statistics.
REFERENCE_MEAN = (0.5, 0.5, 0.5)
REFERENCE_STD = (0.5, 0.5, 0.5)
ATTEMPTS = 10  # the reference's MAX_ATTEMPTS for sample_distorted_bounding_box


@dataclass(frozen=True)
class AugmentConfig:
    """How images are cropped, flipped and normalised.

    Attributes:
        size: side of the output images in pixels.
        scale: range of the crop's fraction of the image area (training).
        ratio: range of the crop's aspect ratio, width / height (training).
        flip_p: probability of a horizontal flip (training).
        eval_crop: fraction of each side kept by the evaluation centre crop.
        mean: per-channel mean subtracted after scaling to [0, 1] (default: the reference's
            [-1, 1] scaling).
        std: per-channel standard deviation divided by.
    """

    size: int
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip_p: float = 0.5
    eval_crop: float = 1.0
    mean: tuple[float, float, float] = REFERENCE_MEAN
    std: tuple[float, float, float] = REFERENCE_STD

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(
                f"The 'size' parameter of AugmentConfig must be an int in [1, inf). Got {self.size!r} instead."
            )
        lo, hi = self.scale
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(
                f"The 'scale' parameter of AugmentConfig must satisfy 0 < low <= high <= 1. Got {self.scale!r} instead."
            )
        if not 0.0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(
                f"The 'ratio' parameter of AugmentConfig must satisfy 0 < low <= high. Got {self.ratio!r} instead."
            )
        if not 0.0 <= self.flip_p <= 1.0:
            raise ValueError(f"The 'flip_p' parameter of AugmentConfig must be in [0, 1]. Got {self.flip_p!r} instead.")
        if not 0.0 < self.eval_crop <= 1.0:
            raise ValueError(
                f"The 'eval_crop' parameter of AugmentConfig must be in (0, 1]. Got {self.eval_crop!r} instead."
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
        raise ValueError(f"Images must be shaped (N, H, W, 3). Got {images.shape} instead.")
    batch = torch.from_numpy(np.ascontiguousarray(images)).to(device, non_blocking=True)
    return batch.permute(0, 3, 1, 2).float().div_(255.0)


def _normalise(x: torch.Tensor, cfg: AugmentConfig) -> torch.Tensor:
    mean = torch.tensor(cfg.mean, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(cfg.std, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return (x - mean) / std


def crop_params(
    n: int,
    cfg: AugmentConfig,
    generator: torch.Generator,
    *,
    extents: np.ndarray | None = None,
    canvas: tuple[int, int] = (1, 1),
) -> torch.Tensor:
    """Affine matrices (n, 2, 3) of random-resized-crops with flips, in grid coordinates.

    Output coordinate u in [-1, 1] reads input coordinate ±w·u + c: w the crop's side as a
    fraction of the canvas, c its centre, the sign a flip. Crops lie inside each image's
    valid ``extents`` (rows of (height, width) in pixels of a ``canvas`` of (H, W) pixels);
    without extents the whole canvas is the image.
    """
    if extents is None:
        hw = torch.tensor(canvas, dtype=torch.float64).expand(n, 2)
    else:
        hw = torch.as_tensor(np.asarray(extents), dtype=torch.float64).reshape(n, 2)
    height, width = hw[:, 0:1], hw[:, 1:2]
    u = torch.rand((n, ATTEMPTS, 2), generator=generator, dtype=torch.float64)
    lo, hi = cfg.scale
    area = (lo + (hi - lo) * u[..., 0]) * height * width
    log_lo, log_hi = math.log(cfg.ratio[0]), math.log(cfg.ratio[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * u[..., 1])
    w, h = torch.sqrt(area * aspect), torch.sqrt(area / aspect)
    fits = (w <= width) & (h <= height)
    first = fits.to(torch.int8).argmax(dim=1, keepdim=True)  # first attempt that fits
    found = fits.any(dim=1)
    side = torch.minimum(height, width)[:, 0]  # fallback: the central square
    w = torch.where(found, w.gather(1, first)[:, 0], side)
    h = torch.where(found, h.gather(1, first)[:, 0], side)
    v = torch.rand((n, 3), generator=generator, dtype=torch.float64)
    spread = torch.where(found[:, None], v[:, :2], torch.full_like(v[:, :2], 0.5))
    left = spread[:, 0] * (width[:, 0] - w)
    top = spread[:, 1] * (height[:, 0] - h)
    sign = torch.where(v[:, 2] < cfg.flip_p, -1.0, 1.0).to(torch.float64)
    canvas_h, canvas_w = canvas
    theta = torch.zeros((n, 2, 3), dtype=torch.float64)
    theta[:, 0, 0] = sign * w / canvas_w
    theta[:, 0, 2] = 2.0 * (left + w / 2) / canvas_w - 1.0
    theta[:, 1, 1] = h / canvas_h
    theta[:, 1, 2] = 2.0 * (top + h / 2) / canvas_h - 1.0
    return theta.float()


def _clamp_to_extents(grid: torch.Tensor, extents: np.ndarray, canvas: tuple[int, int]) -> torch.Tensor:
    """Keep every sample within the centres of each image's valid pixels, so bilinear
    sampling at a crop's edge repeats the edge pixel (as ``tf.image.resize`` does) and never
    blends in the padding beyond it."""
    hw = torch.as_tensor(np.asarray(extents), dtype=grid.dtype, device=grid.device)
    canvas_h, canvas_w = canvas
    max_x = (2.0 * (hw[:, 1] - 0.5) / canvas_w - 1.0).view(-1, 1, 1)
    max_y = (2.0 * (hw[:, 0] - 0.5) / canvas_h - 1.0).view(-1, 1, 1)
    x = torch.minimum(grid[..., 0], max_x)
    y = torch.minimum(grid[..., 1], max_y)
    return torch.stack((x, y), dim=-1)


def train_transform(
    images: np.ndarray,
    cfg: AugmentConfig,
    *,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
    extents: np.ndarray | None = None,
) -> torch.Tensor:
    """Random-resized-crop + flip + normalisation of a batch (see the module docstring).

    Args:
        images: uint8 (N, H, W, 3): the stored originals (with ``extents``), or any images
            cropped whole (``LabelledData.crop_source`` gives the right pair).
        cfg: the augmentation settings.
        generator: a CPU ``torch.Generator``; it alone decides the crops and flips.
        device: where the output lives (the work is done there).
        extents: int (N, 2), each image's valid (height, width) from the top left; ``None``:
            the whole image.

    Returns:
        float32 (N, 3, cfg.size, cfg.size).
    """
    x = to_float(images, device)
    n, canvas = x.shape[0], (int(x.shape[2]), int(x.shape[3]))
    if extents is not None and np.shape(extents) != (n, 2):
        raise ValueError(
            f"The 'extents' parameter of train_transform must have shape {(n, 2)}. Got {np.shape(extents)} instead."
        )
    theta = crop_params(n, cfg, generator, extents=extents, canvas=canvas).to(x.device)
    grid = F.affine_grid(theta, [n, 3, cfg.size, cfg.size], align_corners=False)
    if extents is not None:
        grid = _clamp_to_extents(grid, extents, canvas)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return _normalise(out, cfg)


def eval_transform(images: np.ndarray, cfg: AugmentConfig, *, device: str | torch.device = "cpu") -> torch.Tensor:
    """Normalisation of the evaluation images (already the reference's central square at
    the task resolution); a centre crop of ``cfg.eval_crop`` of each side first when below 1,
    and a resize when they are not at ``cfg.size``."""
    x = to_float(images, device)
    h, w = x.shape[-2:]
    if cfg.eval_crop < 1.0:
        ch, cw = max(1, round(h * cfg.eval_crop)), max(1, round(w * cfg.eval_crop))
        top, left = (h - ch) // 2, (w - cw) // 2
        x = x[:, :, top : top + ch, left : left + cw]
    if tuple(x.shape[-2:]) != (cfg.size, cfg.size):
        x = F.interpolate(x, size=(cfg.size, cfg.size), mode="bilinear", align_corners=False, antialias=True)
    return _normalise(x, cfg)


__all__ = [
    "ATTEMPTS",
    "REFERENCE_MEAN",
    "REFERENCE_STD",
    "AugmentConfig",
    "crop_params",
    "eval_transform",
    "to_float",
    "train_transform",
]
