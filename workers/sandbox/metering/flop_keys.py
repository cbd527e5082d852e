"""Keys and dry runs of the FLOP meter (see :mod:`workers.sandbox.metering.flops` for the contract).

A call's *signature* (shapes, dtypes and grad flags of its tensor arguments, scalars by value)
is part of its cache key; a *dry run* measures one call's forward and backward FLOPs on a
copy of the module, on the ``meta`` device where possible, without touching the real module.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

_SCALARS = (bool, int, float, str, bytes, type(None), torch.dtype, torch.device, enum.Enum)


def signature(obj: Any) -> Any:
    """The part of a call's key that its arguments contribute."""
    if isinstance(obj, torch.Tensor):
        return (obj.shape, obj.dtype, obj.requires_grad)
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(signature(o) for o in obj))
    if isinstance(obj, dict):
        return (type(obj), tuple((k, signature(v)) for k, v in obj.items()))
    return obj if isinstance(obj, _SCALARS) else type(obj)


def _map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        items = [_map_tensors(o, fn) for o in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors_of(obj: Any) -> list[torch.Tensor]:
    """Tensors in an output: nested tuples, lists, dicts and dataclasses."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in tensors_of(o)]
    return []


def _as_input(t: torch.Tensor, device: str | None) -> torch.Tensor:
    """A fresh input like ``t``; a non-leaf when it needs grad, so in-place ops stay legal."""
    c = torch.empty_like(t, device=device) if device else t.detach().clone()
    return c.requires_grad_().clone() if t.requires_grad else c


def _meta_copy(module: nn.Module) -> nn.Module:
    """A deep copy whose parameters and buffers live on ``meta`` (the real ones are not copied)."""
    memo: dict[int, Any] = {}
    for p in module.parameters():
        memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    for b in module.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    return copy.deepcopy(module, memo)


_PARALLEL_WRAPPERS = (nn.parallel.DistributedDataParallel, nn.DataParallel)


def dry_run(module: nn.Module, args: tuple, kwargs: dict, grad: bool, on_meta: bool) -> tuple[int, int]:
    """Forward and backward FLOPs of one call, measured on a copy of ``module``."""
    while isinstance(module, _PARALLEL_WRAPPERS):  # they add communication, not FLOPs
        module = module.module
    clone = _meta_copy(module) if on_meta else copy.deepcopy(module)
    device = "meta" if on_meta else None
    c_args, c_kwargs = _map_tensors((args, kwargs), lambda t: _as_input(t, device))
    with torch.set_grad_enabled(grad):
        with FlopCounterMode(display=False) as counter:
            out = clone(*c_args, **c_kwargs)
        forward = counter.get_total_flops()
        roots = [t for t in tensors_of(out) if t.requires_grad]
        if not roots:
            return forward, 0
        seeds = [torch.ones_like(t) for t in roots]
        with FlopCounterMode(display=False) as counter:
            torch.autograd.backward(roots, seeds)
        return forward, counter.get_total_flops()


def cuda_indices(module: nn.Module, args: Any) -> list[int]:
    tensors = [*module.parameters(), *module.buffers(), *tensors_of(list(args))]
    return sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})


__all__ = ["cuda_indices", "dry_run", "signature", "tensors_of"]
