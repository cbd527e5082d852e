"""``bench/bench_gpu.py`` runs read back: a training step's time at any batch size, how many
trials shared the GPU, and the runs' checks (one device, one sharing, one run per batch size).
Shared by ``paper_scale.py`` (which imports torch) and ``gpu_report.py`` (which does not).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def measured_step_s(step_s_by_batch: dict[int, float]) -> Callable[[int], float]:
    """A training step's seconds at batch ``b`` from steps measured at a few batch sizes: linear
    between them, the smallest's time below (a GPU step does not get faster than its launch
    floor), the largest's time per image above."""
    measured = sorted(step_s_by_batch.items())

    def at(b: int) -> float:
        (b0, s0), (b1, s1) = measured[0], measured[-1]
        if b <= b0:
            return s0
        if b >= b1:
            return s1 * b / b1
        (lo, s_lo), (hi, s_hi) = next(
            (measured[i], measured[i + 1])
            for i in range(len(measured) - 1)
            if measured[i][0] <= b <= measured[i + 1][0]
        )
        return s_lo + (s_hi - s_lo) * (b - lo) / (hi - lo)

    return at


def trials_per_gpu(parser: argparse.ArgumentParser, runs: list[dict]) -> int:
    """How many processes shared the GPU in bench_gpu.py runs (``--procs``), which must agree."""
    procs = {int(run.get("procs", 1)) for run in runs}
    if len(procs) > 1:
        parser.error(
            f"--gpu-json files measured different numbers of processes per GPU "
            f"({', '.join(map(str, sorted(procs)))}): give the runs of one --procs"
        )
    return procs.pop()


def read_steps_by_batch(parser: argparse.ArgumentParser, paths: list[Path], runs: list[dict]) -> dict[int, float]:
    """batch -> seconds per training step of several bench_gpu.py runs, which must be of one
    device, one batch size each."""
    devices = {run.get("device") for run in runs}
    if len(devices) > 1:
        parser.error(
            f"--gpu-json files measured different devices ({', '.join(sorted(map(str, devices)))}): "
            "give the runs of one device"
        )
    out: dict[int, float] = {}
    for path, run in zip(paths, runs, strict=True):
        batch = int(run["batch"])
        if batch in out:
            parser.error(f"--gpu-json: two files measured batch {batch} ({path} is the second)")
        out[batch] = float(run["loop_s_per_step"])
    return out


def hours(h: float) -> str:
    """A duration in hours as the tables print it: minutes, hours or days."""
    return f"{h * 60:.1f} min" if h < 1 else (f"{h:.1f} h" if h < 48 else f"{h / 24:.1f} d")


__all__ = ["hours", "measured_step_s", "read_steps_by_batch", "trials_per_gpu"]
