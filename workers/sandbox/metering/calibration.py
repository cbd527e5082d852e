"""The machine's achieved FLOP rate per CPU-second, measured once per boot of a node.

The FLOP meter runs in the learner's process, so its count is the learner's own word; the
CPU time of the host's processes is not (:mod:`workers.sandbox.metering.usage`). A reference workload
(single-threaded float32 matrix products, the densest arithmetic a learner can do on a CPU)
turns CPU-seconds into the most FLOPs they could have bought here, and
:func:`compute_floor` into the least a learner is charged for them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from pathlib import Path

import numpy as np

from workers.sandbox.harness_dir import harness_dir, owned_alone

REFERENCE_SIZE = 256
MEASURE_S = 0.3
BUILTIN_RATE_SHARE = 1 / 4
"""The share of the reference rate the built-in learners achieve per CPU-second of their
host, rounded down: ``indep_small`` counted 3.7e10 FLOP per CPU-second of its trial calls
against a reference of 1.28e11 (0.29) on the 2-core CI machine (``bench/bench_floor_rate.py``,
docs/isolation.md). This is "the measured work" a CPU-second stands for."""
FLOOR_SHARE = 1 / 4
"""A learner whose own count is below this share of the measured work is charged the floor
and marked: honest learners slower than the built-ins by up to 4x are not floored."""
FLOOR_FRACTION = BUILTIN_RATE_SHARE * FLOOR_SHARE
"""Share of the reference rate every CPU-second is charged at the least (1/16)."""
ALLOWANCE_S = 2.0
"""CPU-seconds of each call never floored: start-up, decoding the task, scoring the dev split."""
GPU_ALLOWANCE_S = 1.0
"""GPU-seconds of each call never floored (CUDA's start-up, the dev pass)."""
GPU_FLOOR_FRACTION = 1 / 64
"""Share of the device's bf16 matrix rate every GPU-second is charged at the least. Not yet
calibrated on the built-ins as :data:`FLOOR_FRACTION` is (no GPU on the CI machine): small
batches reach a small share of a GPU's peak, so the stated factor is lower than the CPU's."""


def measure_flop_rate() -> float:
    """FLOPs per CPU-second of float32 matrix products on this machine (one thread)."""
    from threadpoolctl import threadpool_limits  # noqa: PLC0415 - scikit-learn's dependency

    with threadpool_limits(limits=1):  # idle BLAS threads spin: they would bill CPU for nothing
        return _products_per_cpu_second()


def _products_per_cpu_second() -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((REFERENCE_SIZE, REFERENCE_SIZE), dtype=np.float32)
    b = rng.standard_normal((REFERENCE_SIZE, REFERENCE_SIZE), dtype=np.float32)
    a @ b
    started, products = time.process_time(), 0
    while time.process_time() - started < MEASURE_S:
        a @ b
        products += 1
    used = max(time.process_time() - started, 1e-6)
    return 2.0 * REFERENCE_SIZE**3 * products / used


@functools.cache
def machine_flop_rate(*, cache_dir: Path | None = None) -> float:
    """The node's rate, measured on first use after each boot and recorded in a file of the
    harness's own folder (:func:`~workers.sandbox.harness_dir.harness_dir`, under ``cache_dir``
    or the temporary folder; 0700, this user's alone), so the executors of every run on it
    share one measurement; read once per process, not on every trial."""
    cached = cached_flop_rate(cache_dir=cache_dir)
    if cached is not None:
        return cached
    path = rate_record_path(cache_dir)
    rate = measure_flop_rate()
    if path is not None:
        with contextlib.suppress(OSError):
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            record = json.dumps({"flops_per_cpu_second": rate, "measured_at": time.time()}).encode()
            handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(handle, "wb") as out:
                out.write(record)
            partial.replace(path)
    return rate


def cached_flop_rate(*, cache_dir: Path | None = None) -> float | None:
    """The rate this boot's measurement recorded, or ``None`` before the first one (``nevis
    doctor`` reports it without measuring)."""
    path = rate_record_path(cache_dir)
    if path is None or not owned_alone(path):  # a record someone else could have written is not read
        return None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        rate = float(json.loads(path.read_text())["flops_per_cpu_second"])
        if rate > 0:
            return rate
    return None


def rate_record_path(cache_dir: Path | None = None) -> Path | None:
    """This boot's record in the harness's folder (under ``cache_dir``); None where there is no such folder."""
    folder = harness_dir(cache_dir)
    return None if folder is None else folder / f"flop-rate-{_boot_id()}.json"


def compute_floor(
    cpu_seconds: float | None, flop_rate: float, *, gpu_seconds: float | None = None, gpu_rate: float | None = None
) -> int:
    """The least a call that used ``cpu_seconds`` of the host's CPU, and ``gpu_seconds`` of its
    GPUs (NVML's, :mod:`workers.sandbox.metering.gpu_usage`) at the device's ``gpu_rate``
    (:mod:`workers.sandbox.metering.gpu_calibration`), is charged: each term the same rule, past its
    allowance, at its stated share of what the time bought (:data:`FLOOR_FRACTION`,
    :data:`GPU_FLOOR_FRACTION`)."""
    cpu = 0.0 if cpu_seconds is None else max(cpu_seconds - ALLOWANCE_S, 0.0) * flop_rate
    gpu = 0.0 if gpu_seconds is None or not gpu_rate else max(gpu_seconds - GPU_ALLOWANCE_S, 0.0) * gpu_rate
    return int(cpu * FLOOR_FRACTION + gpu * GPU_FLOOR_FRACTION)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:16]
    except OSError:
        return "unknown"


__all__ = [
    "ALLOWANCE_S",
    "BUILTIN_RATE_SHARE",
    "FLOOR_FRACTION",
    "FLOOR_SHARE",
    "GPU_ALLOWANCE_S",
    "GPU_FLOOR_FRACTION",
    "cached_flop_rate",
    "compute_floor",
    "machine_flop_rate",
    "measure_flop_rate",
    "rate_record_path",
]
