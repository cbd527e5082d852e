"""Benchmark: the wall-time cost of FLOP accounting, and that its count is exact.

Trains the project's small CNN on random 32x32x3 images (batch 64, one intra-op thread),
then runs an evaluation pass under ``torch.no_grad`` with a smaller last batch, with and
without a :class:`~workers.sandbox.flops.FlopMeter` tracking the model. Runs alternate
(plain, metered, plain, ...) so drift on a shared machine hits both alike; the minimum of
each is compared, in wall time and in this process's CPU time (steadier on a shared machine).
The meter's cost includes its dry runs (one per distinct key).

It then counts the same loop with one ``FlopCounterMode`` around all of it and checks the
meter's total is identical (exit status 1 if not). A timing figure is also derived from a
micro-benchmark of the hooks alone, which is immune to the machine's noise.

Usage: .venv/bin/python bench/bench_flops.py [--steps 200] [--batch 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.learners.models import SmallCNN  # noqa: E402
from workers.sandbox.flops import FlopMeter  # noqa: E402

CLASSES = 10
EVAL_BATCHES = (64, 64, 37)


def make_data(steps: int, batch: int, pool: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        (torch.randn(batch, 3, 32, 32, generator=gen), torch.randint(0, CLASSES, (batch,), generator=gen))
        for _ in range(min(pool, steps))
    ]


def run_loop(model: torch.nn.Module, data: list, steps: int) -> tuple[float, float]:
    """Train ``steps`` SGD steps, then one evaluation pass; returns (wall, CPU) seconds."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    start, cpu_start = time.perf_counter(), time.process_time()
    model.train()
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        for b in EVAL_BATCHES:
            model(data[0][0][:b])
    return time.perf_counter() - start, time.process_time() - cpu_start


def hook_cost_us(base: torch.nn.Module, calls: int = 3000, repeats: int = 5) -> float:
    """Microseconds the meter's two hooks take per tracked call (grad on, output hooked).

    Calls the hooks directly on a fixed output, so the figure is free of the model's compute
    and of the machine's noise; a tracked call costs this plus torch's hook dispatch.
    """
    model = copy.deepcopy(base).eval()  # eval: BatchNorm accepts a batch of one
    meter = FlopMeter()
    meter.track(model)
    x = torch.randn(1, 3, 8, 8)
    out = model(x)  # measures the key once
    (pre,), (post,) = model._forward_pre_hooks.values(), model._forward_hooks.values()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            pre(model, (x,))
            post(model, (x,), {}, out)
        best = min(best, time.perf_counter() - start)
    meter.untrack_all()
    return best / calls * 1e6


def dry_run_seconds(base: torch.nn.Module, batch: int) -> tuple[float, float]:
    """Wall time of a tracked call with a new key: the first in this process, then another."""
    model = copy.deepcopy(base)
    meter = FlopMeter()
    meter.track(model)
    x = torch.randn(batch, 3, 32, 32)
    start = time.perf_counter()
    model(x)
    first = time.perf_counter() - start
    start = time.perf_counter()
    model(x[: batch // 2])
    later = time.perf_counter() - start
    meter.untrack_all()
    return first, later


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    initial = SmallCNN(CLASSES, width=args.width)
    data = make_data(args.steps, args.batch)
    first_dry, later_dry = dry_run_seconds(initial, args.batch)  # also pays one-time imports
    run_loop(copy.deepcopy(initial), data, 3)  # warm-up: allocator, kernels

    plain_times, meter_times, totals = [], [], []
    for _ in range(args.repeats):
        plain_times.append(run_loop(copy.deepcopy(initial), data, args.steps))
        meter = FlopMeter()
        meter_times.append(run_loop(meter.track(copy.deepcopy(initial)), data, args.steps))
        meter.untrack_all()
        totals.append((meter.total, meter.measurements, meter.source))

    with FlopCounterMode(display=False) as counter:
        run_loop(copy.deepcopy(initial), data, args.steps)
    reference = counter.get_total_flops()

    plain, metered = min(t[0] for t in plain_times), min(t[0] for t in meter_times)
    plain_cpu, metered_cpu = min(t[1] for t in plain_times), min(t[1] for t in meter_times)
    step_ms = plain / args.steps * 1e3
    per_call = hook_cost_us(initial)
    print(f"small CNN (width {args.width}), 32x32x3 random data, batch {args.batch}, "
          f"{args.steps} steps + eval {EVAL_BATCHES}, 1 thread, {args.repeats} repeats")
    for name, times in (("plain", plain_times), ("metered", meter_times)):
        print(f"{name:8}: wall min {min(t[0] for t in times):7.3f} s, CPU min "
              f"{min(t[1] for t in times):7.3f} s   (wall runs "
              f"{', '.join(f'{t[0]:.3f}' for t in times)})")
    print(f"overhead: {100 * (metered - plain) / plain:+.2f} % of wall time, "
          f"{100 * (metered_cpu - plain_cpu) / plain_cpu:+.2f} % of CPU time (target <= 1 %)")
    print(f"hooks alone: {per_call:.1f} us per tracked call = "
          f"{100 * per_call / (step_ms * 1e3):.3f} % of a {step_ms:.1f} ms step")
    print(f"dry runs: first tracked call in a process {first_dry:.2f} s (one-time torch imports "
          f"included), a later new key {1e3 * later_dry:.0f} ms; {totals[0][1]} keys per run")
    total, measurements, source = totals[0]
    same = all(t[0] == reference for t in totals)
    print(f"FLOPs   : meter {total:,} ({source}, {measurements} dry runs), "
          f"FlopCounterMode {reference:,} -> {'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
