"""Inference copies of a loaded network: batch norms folded into their convolutions, channels-last.

Why: a loaded predictor (a checkpoint the probe pool measures, the harness's test predictions,
FT-d's candidates) only ever runs in eval mode, where a ``BatchNorm2d`` after a bias-free
convolution is a per-channel affine map that the convolution can absorb. Folding it and storing
weights and activations channels-last computes the same function (to float rounding, ~1e-7)
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

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval


def _weights_version(model: nn.Module) -> tuple[int, ...]:
    """In-place changes to any weight or statistic (an optimizer step, ``load_state_dict``)
    bump it."""
    return tuple(t._version for t in (*model.parameters(), *model.buffers()))


def _foldable(conv: nn.Module, norm: nn.Module) -> bool:
    return (isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d)
            and norm.track_running_stats and norm.running_mean is not None)


def fold_batch_norms(model: nn.Module) -> nn.Module:
    """``model`` (in eval mode) with every foldable conv → batch-norm pair merged, in place.

    Pairs are adjacent children of an ``nn.Sequential``, or the attribute pairs a module names
    in ``BATCH_NORM_FOLDS`` (a residual block calls ``bn1(conv1(x))`` from its ``forward``)."""
    for module in list(model.modules()):
        if isinstance(module, nn.Sequential):
            names = list(module._modules)
            pairs = list(zip(names, names[1:]))
        else:
            pairs = list(getattr(module, "BATCH_NORM_FOLDS", ()))
        for conv_name, norm_name in pairs:
            conv, norm = module._modules.get(conv_name), module._modules.get(norm_name)
            if conv is not None and norm is not None and _foldable(conv, norm):
                setattr(module, conv_name, fuse_conv_bn_eval(conv, norm))
                setattr(module, norm_name, nn.Identity())
    return model


def inference_copy(model: nn.Module, *, channels_last: bool = True) -> nn.Module:
    """A folded (and channels-last) eval-mode copy of ``model``; ``model`` is untouched."""
    twin = copy.deepcopy(model).eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    fold_batch_norms(twin)
    return twin.to(memory_format=torch.channels_last) if channels_last else twin


class InferenceTwin:
    """The inference copy of one loaded network and of a view of it (``make_view``: the module
    a representation pass calls), built on first use while the network's weights are still the
    loaded ones (see the module docstring); :meth:`get` gives ``None`` once they changed."""

    def __init__(self, model: nn.Module, make_view: Callable[[nn.Module], nn.Module]) -> None:
        self._model, self._make_view = model, make_view
        self._loaded = _weights_version(model)
        self._twin: tuple[nn.Module, nn.Module] | None = None
        self._stale = False

    def get(self) -> tuple[nn.Module, nn.Module] | None:
        """(copy, view of the copy), or ``None``: run the network itself."""
        if self._stale:
            return None
        if _weights_version(self._model) != self._loaded:
            self._stale, self._twin = True, None  # trained after loading: run it as itself
            return None
        if self._twin is None:
            twin = inference_copy(self._model)
            self._twin = twin, self._make_view(twin)
        return self._twin


def channels_last_input(x: torch.Tensor) -> torch.Tensor:
    """A 4-d image batch in channels-last memory (what the copy's first convolution reads)."""
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


__all__ = ["InferenceTwin", "channels_last_input", "fold_batch_norms", "inference_copy"]
