"""The node's achieved bf16 matrix rate per GPU-second: the GPU term of the FLOP floor.

As the CPU's rate (:mod:`workers.sandbox.metering.calibration`) turns CPU-seconds into what they could
have bought, this turns a host's GPU-seconds (NVML's, :mod:`workers.sandbox.metering.gpu_usage`) into
FLOPs: dense bf16 products on device 0, the densest arithmetic a learner can do there, measured
once per harness process. Where there is no CUDA device (this repository's CI machine) there
is no rate, and :func:`gpu_flop_rate` says why instead of guessing one.
"""

from __future__ import annotations

import functools
import time

REFERENCE_SIZE = 4096
MEASURE_S = 0.5


@functools.cache
def gpu_flop_rate() -> tuple[float | None, str]:
    """FLOPs per GPU-second of bf16 matrix products on ``cuda:0``, or ``None`` and why not."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return None, "no GPU rate: torch is not installed"
    if not torch.cuda.is_available():
        return None, "no GPU rate: no CUDA device on this node"
    a = torch.randn(REFERENCE_SIZE, REFERENCE_SIZE, device="cuda:0", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    (a @ b).sum().item()  # warm the kernels up
    products, started = 0, time.perf_counter()
    while time.perf_counter() - started < MEASURE_S:
        for _ in range(8):
            a @ b
        torch.cuda.synchronize()
        products += 8
    return 2.0 * REFERENCE_SIZE**3 * products / (time.perf_counter() - started), ""


__all__ = ["gpu_flop_rate"]
