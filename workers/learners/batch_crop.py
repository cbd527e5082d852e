"""The training crop and flip of a whole batch as two separable gathers, on the batch's device.

Why beside :func:`workers.learners.augment.train_transform`: that path converts every image's
whole canvas to float and resamples it through a general 2-D ``grid_sample``. The reference's
crop is axis-aligned (a window, a resize, a left-right flip), so bilinear resampling splits
into rows then columns: gather the two source rows each output row reads (from the uint8
canvas, so only those rows become floats), blend them, then gather and blend the two columns.
The arithmetic is ``grid_sample``'s (``align_corners=False``, border padding, samples clamped
to each image's valid extent), so the same affine matrices give the same pixels up to float
rounding. The matrices come from :func:`~workers.learners.augment.crop_params`, unchanged: the
same draws from the same generator give the same windows and flips (docs/fidelity.md P2, P6).

The result is NHWC; it is returned as (N, 3, S, S) in channels-last memory (a free permute,
the layout convolutions on GPUs prefer) when asked, contiguous otherwise (the CPU default:
torch 2.13's CPU convolutions corrupted the heap on channels-last inputs to 8-channel layers).
"""

from __future__ import annotations

import numpy as np
import torch

from workers.learners.augment import AugmentConfig, crop_params


def _axis(
    scale: torch.Tensor, centre: torch.Tensor, size: int, canvas: int, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source indices (low, high) and the high one's weight for ``size`` outputs along one axis.

    As ``affine_grid`` + ``grid_sample``: output u = (2j + 1) / size − 1 reads normalised
    x = scale·u + centre, i.e. pixel ((x + 1)·canvas − 1) / 2, kept within [0, valid − 1].
    """
    u = (torch.arange(size, device=scale.device, dtype=torch.float32) * 2 + 1) / size - 1
    pixel = ((scale[:, None] * u + centre[:, None]) + 1) * canvas / 2 - 0.5
    pixel = torch.minimum(pixel, (valid[:, None] - 1).to(pixel.dtype)).clamp_(min=0)
    low = pixel.floor()
    weight = pixel - low
    low_i = low.long()
    return low_i, (low_i + 1).clamp_(max=canvas - 1), weight


def crop_flip(
    source: torch.Tensor,
    theta: torch.Tensor,
    cfg: AugmentConfig,
    extents: torch.Tensor | None = None,
    *,
    channels_last: bool = False,
) -> torch.Tensor:
    """Crop, resize and flip uint8 images by axis-aligned affine matrices, then normalise.

    Args:
        source: uint8 (N, H, W, 3), on the device the work is done on.
        theta: (N, 2, 3) matrices from :func:`~workers.learners.augment.crop_params` (no
            rotation or shear: their off-diagonal terms are ignored).
        cfg: gives the output side ``size`` and the normalisation.
        extents: int (N, 2) valid (height, width) of each image; ``None``: the whole canvas.
        channels_last: return channels-last memory (no copy) rather than contiguous.

    Returns:
        float32 (N, 3, size, size).
    """
    n, height, width, channels = source.shape
    size, device = cfg.size, source.device
    theta = theta.to(device=device, dtype=torch.float32)
    if extents is None:  # filled on the device: no host copy that would stall a CUDA stream
        valid = torch.empty((n, 2), dtype=torch.long, device=device)
        valid[:, 0], valid[:, 1] = height, width
    else:
        valid = extents.to(device)
    y0, y1, wy = _axis(theta[:, 1, 1], theta[:, 1, 2], size, height, valid[:, 0])
    x0, x1, wx = _axis(theta[:, 0, 0], theta[:, 0, 2], size, width, valid[:, 1])
    rows = source.reshape(n * height, width * channels)
    base = (torch.arange(n, device=device) * height)[:, None]
    both = rows.index_select(0, torch.cat([base + y0, base + y1], dim=1).view(-1)).float()
    both = both.view(n, 2, size, width, channels)
    blended = torch.lerp(both[:, 0], both[:, 1], wy.view(n, size, 1, 1))  # (n, size, width, 3)
    cols = torch.cat([x0, x1], dim=1).view(n, 1, 2 * size, 1).expand(n, size, 2 * size, channels)
    picked = blended.gather(2, cols)
    out = torch.lerp(picked[:, :, :size], picked[:, :, size:], wx.view(n, 1, size, 1))
    scale = torch.empty(channels, device=device)  # (x / 255 − mean) / std = x · scale − shift
    shift = torch.empty(channels, device=device)
    for c in range(channels):  # fills, not copies from the host
        scale[c], shift[c] = 1.0 / (255.0 * cfg.std[c]), cfg.mean[c] / cfg.std[c]
    out = out.mul_(scale).sub_(shift)
    out = out.permute(0, 3, 1, 2)
    return out if channels_last else out.contiguous()


def train_batch(
    images: np.ndarray | torch.Tensor,
    cfg: AugmentConfig,
    *,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
    extents: np.ndarray | None = None,
    channels_last: bool = False,
) -> torch.Tensor:
    """:func:`~workers.learners.augment.train_transform`'s crop, flip and normalisation by
    :func:`crop_flip`: same arguments, same draws from ``generator``, same pixels up to float
    rounding. ``images`` may already be a uint8 tensor on ``device`` (a resident source)."""
    source = images if isinstance(images, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(images))
    if source.dtype != torch.uint8 or source.ndim != 4 or source.shape[-1] != 3:
        raise ValueError(f"Images must be uint8 (N, H, W, 3). Got {source.dtype} {tuple(source.shape)} instead.")
    n, canvas = int(source.shape[0]), (int(source.shape[1]), int(source.shape[2]))
    if extents is not None and np.shape(extents) != (n, 2):
        raise ValueError(
            f"The 'extents' parameter of train_batch must have shape {(n, 2)}. Got {np.shape(extents)} instead."
        )
    theta = crop_params(n, cfg, generator, extents=extents, canvas=canvas)
    source = source.to(device, non_blocking=True)
    valid = None if extents is None else torch.as_tensor(np.asarray(extents)).reshape(n, 2)
    return crop_flip(source, theta, cfg, valid, channels_last=channels_last)


__all__ = ["crop_flip", "train_batch"]
