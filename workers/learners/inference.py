"""Inference copies of a loaded network: batch norms folded into their convolutions, channels-last.

Why: a loaded predictor (a checkpoint the probe pool measures, the harness's test predictions,
FT-d's candidates) only ever runs in eval mode, where a ``BatchNorm2d`` after a bias-free
convolution is a per-channel affine map that the convolution can absorb. Folding it and storing
weights and activations channels-last (networks whose convolutions are all 16 channels or
wider: :func:`channels_last_suits`) computes the same function (to float rounding, ~1e-7)
with less memory traffic: small_cnn's features of 2,000 64-px images took 2.0 s instead of 4.6 s
on two CPU threads (measured 2026-12-06, docs/benchmarks.md). The FLOP meter counts
convolutions and matmuls by shape, and folding removes no counted operation, so a pass counts
the same FLOPs either way (tests/unit/learners/test_inference.py).

The copy is built once per loaded network, and only while that network's weights are the ones
it was loaded with (tensor version counters): a loaded network that is then trained (PT starts
from a pretrained predictor) runs as itself, so training's dev evaluations never see stale
weights and never pay for a rebuild.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval


def _weights_version(model: nn.Module) -> tuple[int, ...]:
    """In-place changes to any weight or statistic (an optimizer step, ``load_state_dict``)
    bump it."""
    return tuple(t._version for t in (*model.parameters(), *model.buffers()))  # noqa: SLF001


def _foldable(conv: nn.Module, norm: nn.Module) -> bool:
    return (
        isinstance(conv, nn.Conv2d)
        and isinstance(norm, nn.BatchNorm2d)
        and norm.track_running_stats
        and norm.running_mean is not None
    )


def fold_batch_norms(model: nn.Module) -> nn.Module:
    """``model`` (in eval mode) with every foldable conv → batch-norm pair merged, in place.

    Pairs are adjacent children of an ``nn.Sequential``, or the attribute pairs a module names
    in ``BATCH_NORM_FOLDS`` (a residual block calls ``bn1(conv1(x))`` from its ``forward``)."""
    for module in list(model.modules()):
        if isinstance(module, nn.Sequential):
            names = list(module._modules)  # noqa: SLF001
            pairs = list(zip(names, names[1:]))
        else:
            pairs = list(getattr(module, "BATCH_NORM_FOLDS", ()))
        for conv_name, norm_name in pairs:
            conv, norm = module._modules.get(conv_name), module._modules.get(norm_name)  # noqa: SLF001
            if conv is not None and norm is not None and _foldable(conv, norm):
                setattr(module, conv_name, fuse_conv_bn_eval(conv, norm))
                setattr(module, norm_name, nn.Identity())
    return model


MIN_CHANNELS_LAST_WIDTH = 16


def channels_last_suits(model: nn.Module) -> bool:
    """Whether every convolution is wide enough for channels-last on CPUs: in training, torch
    2.13's CPU convolutions corrupted the heap on channels-last inputs to 8-channel layers
    (:mod:`workers.learners.batch_crop`). Inference copies showed no fault under glibc's heap
    checks (``MALLOC_CHECK_=3``, widths 2-16, 2026-12-06), but narrow test networks keep the
    plain layout anyway; the built-in networks (32 or 64 channels and up) all qualify."""
    return all(
        m.out_channels >= MIN_CHANNELS_LAST_WIDTH and (m.in_channels == 3 or m.in_channels >= MIN_CHANNELS_LAST_WIDTH)
        for m in model.modules()
        if isinstance(m, nn.Conv2d)
    )


def inference_copy(model: nn.Module, *, channels_last: bool) -> nn.Module:
    """A folded (and, if asked, channels-last) eval-mode copy of ``model``; ``model`` is untouched."""
    twin = copy.deepcopy(model).eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    fold_batch_norms(twin)
    if channels_last:
        twin.to(memory_format=torch.channels_last)
    return twin


@dataclass(frozen=True)
class Twin:
    """An inference copy, the view of it a representation pass calls, and its input layout."""

    model: nn.Module
    view: nn.Module
    channels_last: bool

    def input(self, x: torch.Tensor) -> torch.Tensor:
        """A batch laid out as the copy's first convolution reads it (never mixed layouts)."""
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last and x.dim() == 4 else x


class InferenceTwin:
    """The inference copy of one loaded network and of a view of it (``make_view``: the module
    a representation pass calls), built on first use while the network's weights are still the
    loaded ones (see the module docstring); :meth:`get` gives ``None`` once they changed."""

    def __init__(self, model: nn.Module, make_view: Callable[[nn.Module], nn.Module]) -> None:
        self._model, self._make_view = model, make_view
        self._loaded = _weights_version(model)
        self._twin: Twin | None = None
        self._stale = False

    def get(self, model: nn.Module) -> Twin | None:
        """The copy of ``model``, or ``None``: run the network itself. ``None`` too where
        ``model`` is not the network this twin was made for (a predictor copied with another
        network, as OFM's fresh start is, must not run the loaded one's weights)."""
        if self._stale or model is not self._model:
            return None
        if _weights_version(self._model) != self._loaded:
            self._stale, self._twin = True, None  # trained after loading: run it as itself
            return None
        if self._twin is None:
            wide = channels_last_suits(self._model)
            copy_ = inference_copy(self._model, channels_last=wide)
            self._twin = Twin(copy_, self._make_view(copy_), wide)
        return self._twin


__all__ = [
    "MIN_CHANNELS_LAST_WIDTH",
    "InferenceTwin",
    "Twin",
    "channels_last_suits",
    "fold_batch_norms",
    "inference_copy",
]
