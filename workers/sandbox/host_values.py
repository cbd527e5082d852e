"""What learner code hands the learner host, checked before it goes on the wire, and the
figures the host adds to a reply (the call's FLOPs, the process's peak memory).

Learner code may return anything; a wrong type is the learner's error (a ``LearnerError``
the host answers as an ``error`` frame), found here rather than by the wire's encoder.
"""

from __future__ import annotations

import resource
from typing import Any

import numpy as np

from services.core.errors import LearnerError
from workers.sandbox.context import LocalTrialContext


def numeric(value: Any, what: str) -> np.ndarray:
    """``value`` as a numeric array (what a learner's predict or features returned)."""
    array = np.asarray(value)
    if array.dtype.hasobject or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise LearnerError(f"{what} must return a numeric array; got dtype {array.dtype}.")
    return array


def blob(value: Any, what: str) -> bytes:
    """``value`` as bytes (a saved predictor, a past one sent back)."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise LearnerError(f"{what} must return bytes; got {type(value).__name__}.")
    return bytes(value)


def flops(ctx: LocalTrialContext, *, updates: int | None = None) -> dict[str, Any]:
    """The meter's figures; a trial's also carry ``flops_updates``, what its training spent on
    updates (NEVIS'22's count: :attr:`~workers.sandbox.metering.flops.FlopMeter.updates`)."""
    meter = ctx.meter
    fields = {
        "flops_measured": int(meter.measured),
        "flops_reported": int(meter.reported),
        "flops_untracked": int(meter.untracked),
    }
    if updates is not None:
        fields["flops_updates"] = int(updates)
    return fields


def peak_memory(device: str) -> int:
    """The host's memory high-water mark: the GPU allocator's on CUDA, else the process's RSS."""
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


__all__ = ["blob", "flops", "numeric", "peak_memory"]
