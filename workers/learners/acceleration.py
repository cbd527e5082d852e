"""Speed settings of the built-in networks: channels-last memory, bf16 autocast, ``torch.compile``,
and several trials sharing a GPU.

Why apart: none of them changes what is computed, only how fast, so the FLOP meter's count of a
step is the same with and without them (tests/unit/learners/test_batch_input.py, and on a GPU
tests/unit/learners/test_on_devices.py through bench/gpu_checks.sh):

- channels-last changes only the memory layout of weights and activations (GPU convolutions
  run faster in it; on CPUs it is left off by default);
- bf16 autocast runs matmuls and convolutions in bfloat16 on GPUs that have bf16 units; the
  meter keys a call on its *input* dtypes (float32 either way) and counts by shapes;
- ``torch.compile`` is applied to a network's children, never to the module the meter hooks,
  and a copy of a compiled child runs eagerly, so the meter's dry runs (which copy the module)
  count the eager operations. Off by default: compiling ResNet-34 takes minutes and did not
  pay off on the 2-core CPU machine this was measured on (docs/performance-input.md).
  ``compile_mode="reduce-overhead"`` replays each child's kernels as a CUDA graph: one launch
  where a small batch's step would otherwise wait on hundreds (on CPUs, torch runs it as the
  default mode);
- several trials on one GPU (:func:`gpu_share`) run side by side in their own processes, each
  metered as alone: at small batches one trial leaves the GPU waiting on its launches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile's


@dataclass(frozen=True)
class Acceleration:
    """How a trial runs its network; ``None``: the default for the device (on for CUDA only)."""

    channels_last: bool | None = None
    autocast: bool | None = None
    compile: bool = False
    compile_mode: str = "default"

    def __post_init__(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(
                f"Acceleration's 'compile_mode' must be one of {', '.join(COMPILE_MODES)}. Got {self.compile_mode!r}."
            )

    def resolve(self, device: str | torch.device) -> Acceleration:
        """The concrete settings on ``device``: channels-last and bf16 autocast on CUDA
        (autocast only where the device supports bf16), off on CPUs unless asked for."""
        cuda = torch.device(device).type == "cuda"
        bf16 = cuda and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return replace(
            self,
            channels_last=cuda if self.channels_last is None else self.channels_last,
            autocast=bf16 if self.autocast is None else self.autocast,
        )


class _CompiledCall:
    """A module's compiled call that copies do not inherit: ``deepcopy`` gives ``None``, so a
    copy (the FLOP meter's dry run) runs the module eagerly."""

    def __init__(self, module: nn.Module, mode: str = "default") -> None:
        self.fn = torch.compile(module.forward, mode=mode)  # not ``_call_impl``: torch's own frames are skipped

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __deepcopy__(self, memo: dict) -> None:
        return None


def prepare(model: nn.Module, accel: Acceleration) -> nn.Module:
    """``model`` in place in channels-last memory and with its children compiled, as asked.

    The model itself stays eager so that the hooks on its call (FLOP meter) run as Python."""
    if accel.channels_last:
        model.to(memory_format=torch.channels_last)
    if accel.compile:
        for child in model.children():
            child._compiled_call_impl = _CompiledCall(child, accel.compile_mode)  # noqa: SLF001
    return model


def uncompile(model: nn.Module) -> None:
    """Back to eager calls (before a model is saved or handed on)."""
    for child in model.children():
        child._compiled_call_impl = None  # noqa: SLF001


def gpu_share(trials_per_gpu: int, workers: int = 1) -> float:
    """``gpus_per_worker`` of a trial of ``workers`` workers when ``trials_per_gpu`` trials share
    each GPU; a multi-worker trial's ranks need a GPU each (NCCL refuses two of a group on one)."""
    if not isinstance(trials_per_gpu, int) or isinstance(trials_per_gpu, bool) or not 1 <= trials_per_gpu <= 64:
        raise ValueError(f"The 'trials_per_gpu' parameter must be an int in [1, 64]. Got {trials_per_gpu!r}.")
    if trials_per_gpu > 1 and workers > 1:
        raise ValueError(
            "A 'trials_per_gpu' above 1 needs one worker per trial: the ranks of a multi-worker "
            f"trial take a GPU each. Got trials_per_gpu={trials_per_gpu}, workers={workers}."
        )
    return 1.0 / trials_per_gpu


@contextlib.contextmanager
def autocast(device: str | torch.device, accel: Acceleration) -> Iterator[None]:
    """bf16 autocast on ``device`` when ``accel.autocast``; nothing otherwise."""
    if not accel.autocast:
        yield
        return
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        yield


__all__ = ["COMPILE_MODES", "Acceleration", "autocast", "gpu_share", "prepare", "uncompile"]
