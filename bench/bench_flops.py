"""Benchmark: the CPU-time cost of FLOP accounting, and that its count is exact.

Trains the project's small CNN on random 32x32x3 images (batch 64, one intra-op thread),
then runs an evaluation pass under ``torch.no_grad`` with a smaller last batch, in three
copies at once: plain, with a :class:`~workers.sandbox.metering.flops.FlopMeter` tracking the model,
and with a meter that only *watches* (the model never passed to ``track``, as a learner that
forgets ``ctx.track``). The copies take turns step by step and each step is timed alone in
this thread's CPU time, so the machine's drift and other users' bursts hit all three alike
(timing whole runs one after another let a rising load pass for meter cost: +3 % and +14 %
on a loaded machine). The overhead is the median of each step's ratio to the plain step
beside it, plus what the steps that ran a dry run (one per distinct key, each meter its own)
took beyond theirs. Targets: <= 1 % tracked, <= 3 % watched.

It then counts the same loop with one ``FlopCounterMode`` around all of it and checks both
meters' totals are identical to it (exit status 1 if not). A timing figure is also derived
from a micro-benchmark of the hooks alone, which is immune to the machine's noise, and the
per-call overhead of each accounting mode is timed on tiny inputs (so the model's compute
hardly hides it) for the small CNN and the low-res ResNet-34: tracked, untracked (watched),
and tracked while watching (what a trial in the learner host does).

Usage: .venv/bin/python bench/bench_flops.py [--steps 200] [--batch 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.learners.models import LowResResNet34, SmallCNN
from workers.sandbox.metering.flop_counter import forget_process_counts
from workers.sandbox.metering.flops import FlopMeter

CLASSES = 10
EVAL_BATCHES = (64, 64, 37)


def make_data(steps: int, batch: int, pool: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        (torch.randn(batch, 3, 32, 32, generator=gen), torch.randint(0, CLASSES, (batch,), generator=gen))
        for _ in range(min(pool, steps))
    ]


def run_loop(model: torch.nn.Module, data: list, steps: int) -> None:
    """Train ``steps`` SGD steps, then one evaluation pass (what the reference count sees)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    model.train()
    for step in range(steps):
        train_step(model, opt, data[step % len(data)])
    model.eval()
    with torch.no_grad():
        for b in EVAL_BATCHES:
            model(data[0][0][:b])


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: tuple) -> None:
    x, y = batch
    loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


LOOP_MODES = ("plain", "tracked", "untracked")


@dataclasses.dataclass
class Loop:
    """One accounting mode's copy of the run: its model, optimiser, meter and timings."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    meter: FlopMeter | None
    cpu: list[float] = dataclasses.field(default_factory=list)  # per step / eval batch
    dry: list[bool] = dataclasses.field(default_factory=list)  # whether that item ran a dry run

    def timed(self, mode: str, work: Callable[..., object], *args: object) -> None:
        meter = self.meter
        if mode == "untracked":
            meter.watch()  # between calls, as the learner host does; not part of the call
        forget_process_counts()  # each meter measures its own keys (none borrows another's)
        before = meter.measurements if meter else 0
        start = time.thread_time()
        work(*args)
        self.cpu.append(time.thread_time() - start)
        if mode == "untracked":
            meter.unwatch()
        self.dry.append(meter is not None and meter.measurements > before)


def interleaved_run(initial: torch.nn.Module, data: list, steps: int) -> dict[str, Loop]:
    """The training run and evaluation pass in every mode at once, one step of each in turn.

    Each training step and each evaluation batch is timed on its own, in this thread's CPU
    time, and the modes take turns step by step (the order rotating), so a shared machine's
    drift and bursts hit all of them alike and each step of a mode has a neighbour step of
    the plain run to be compared with. The process-wide counts are dropped before each item,
    so each meter pays a dry run for each of its keys, as in the first trial of a fresh worker.
    """
    loops = {}
    for mode in LOOP_MODES:
        model = copy.deepcopy(initial).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
        meter = None if mode == "plain" else FlopMeter()
        if mode == "tracked":
            meter.track(model)
        loops[mode] = Loop(model, opt, meter)
    for step in range(steps):
        for mode in LOOP_MODES[step % 3 :] + LOOP_MODES[: step % 3]:
            loop = loops[mode]
            loop.timed(mode, train_step, loop.model, loop.opt, data[step % len(data)])
    for loop in loops.values():
        loop.model.eval()
    with torch.no_grad():
        for i, b in enumerate(EVAL_BATCHES):
            for mode in LOOP_MODES[i % 3 :] + LOOP_MODES[: i % 3]:
                loops[mode].timed(mode, loops[mode].model, data[0][0][:b])
    for loop in loops.values():
        if loop.meter is not None:
            loop.meter.untrack_all()
    return loops


def loop_overhead(runs: list[dict[str, Loop]], mode: str) -> tuple[float, float, float]:
    """(steady, dry runs, total) overhead of ``mode`` over the plain run, in % of its CPU time.

    Steady: the median of the per-item ratios to the plain run's item beside it (items with a
    dry run left out), which a burst of other work on the machine barely moves. Dry runs: what
    the items that ran one took beyond their plain neighbour. Total: the two together.
    """
    ratios, dry_extra, plain_total = [], 0.0, 0.0
    for loops in runs:
        plain, metered = loops["plain"], loops[mode]
        plain_total += sum(plain.cpu)
        for base, t, dry in zip(plain.cpu, metered.cpu, metered.dry):
            if dry:
                dry_extra += t - base
            else:
                ratios.append(t / base - 1)
    steady, dry = 100 * statistics.median(ratios), 100 * dry_extra / plain_total
    return steady, dry, steady + dry


def hook_costs_us(base: torch.nn.Module, calls: int = 3000, repeats: int = 5) -> dict[str, float]:
    """Microseconds the accounting's hooks take per call (grad on, output hooked), by mode.

    Calls the hooks a call would run (the watch's global pre-hook and the exit hook it hangs
    on the module; a tracked module's own two), in torch's order, directly on a fixed output,
    so the figure is free of the model's compute and of the machine's noise; a call costs this
    plus torch's hook dispatch (a few us, paid by any module with a hook).
    """
    x = torch.randn(1, 3, 8, 8)
    costs = {}
    for mode in CALL_MODES:
        model = copy.deepcopy(base).eval()  # eval: BatchNorm accepts a batch of one
        meter = FlopMeter()
        if mode.startswith("tracked"):
            meter.track(model)
        if mode != "tracked":
            meter.watch()
        out = model(x)  # measures the key once
        own_pre, own_post = list(model._forward_pre_hooks.values()), list(model._forward_hooks.values())
        enters = list(torch.nn.modules.module._global_forward_pre_hooks.values())
        exits = []
        if enters:  # the watch's exit hook: what its pre-hook hangs on the module, last
            enters[0](model, (x,))
            exits = [list(model._forward_hooks.values())[-1]]
            exits[0](model, (x,), {}, out)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                for hook in enters:
                    hook(model, (x,))
                for hook in own_pre:
                    hook(model, (x,))
                for hook in own_post:
                    hook(model, (x,), {}, out)
                for hook in exits:
                    hook(model, (x,), {}, out)
            best = min(best, time.perf_counter() - start)
        meter.untrack_all()
        costs[mode] = best / calls * 1e6
    return costs


CALL_MODES = ("tracked", "untracked", "tracked+watch")


def call_overhead_us(
    model: torch.nn.Module, x: torch.Tensor, calls: int, blocks: int
) -> tuple[float, dict[str, float]]:
    """A plain call's time and each accounting mode's extra time per call, in microseconds.

    Grad on and train mode (each output gets its backward hook); every key is measured before
    the timing starts, so this is the steady-state cost: key lookup, add, hook dispatch. One
    copy of the model per mode; blocks of ``calls`` calls alternate between the modes and the
    fastest block of each, in this thread's CPU time, counts, so a busy machine's pauses fall
    out of the figures.
    """
    copies = {mode: copy.deepcopy(model).train() for mode in ("plain", *CALL_MODES)}
    meters = {mode: FlopMeter() for mode in CALL_MODES}
    for mode in ("tracked", "tracked+watch"):
        meters[mode].track(copies[mode])
    watched = {"untracked", "tracked+watch"}
    best = dict.fromkeys(copies, float("inf"))
    for block in range(blocks + 1):  # block 0 measures the keys and warms up
        for mode, net in copies.items():
            if mode in watched:
                meters[mode].watch()
            start = time.thread_time()
            for _ in range(calls):
                net(x)
            elapsed = time.thread_time() - start
            if mode in watched:
                meters[mode].unwatch()
            if block:
                best[mode] = min(best[mode], elapsed / calls)
    for meter in meters.values():
        meter.untrack_all()
    plain = best.pop("plain")
    return plain * 1e6, {mode: (t - plain) * 1e6 for mode, t in best.items()}


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

    runs = [interleaved_run(initial, data, args.steps) for _ in range(args.repeats)]
    with FlopCounterMode(display=False) as counter:
        run_loop(copy.deepcopy(initial), data, args.steps)
    reference = counter.get_total_flops()

    plain_cpu = [sum(loops["plain"].cpu) for loops in runs]
    step_ms = statistics.median(t for loops in runs for t in loops["plain"].cpu[: args.steps]) * 1e3
    resnet = LowResResNet34(CLASSES, width=8)  # the same modules as width 64, a fraction of the compute
    hooks = {"small CNN": hook_costs_us(initial), "ResNet-34": hook_costs_us(resnet, calls=1000)}
    per_call = hooks["small CNN"]["tracked"]
    print(
        f"small CNN (width {args.width}), 32x32x3 random data, batch {args.batch}, "
        f"{args.steps} steps + eval {EVAL_BATCHES}, 1 thread, {args.repeats} repeats, the modes "
        "taking turns step by step; CPU time of this thread"
    )
    for mode in LOOP_MODES:
        print(f"{mode:9}: CPU " + ", ".join(f"{sum(loops[mode].cpu):.3f}" for loops in runs) + " s per run")
    for mode, target in (("tracked", 1), ("untracked", 3)):
        steady, dry, total = loop_overhead(runs, mode)
        raw = ", ".join(f"{100 * (sum(loops[mode].cpu) / plain - 1):+.2f}" for loops, plain in zip(runs, plain_cpu))
        verdict = "met" if total <= target else "NOT met"
        print(
            f"{mode + ' overhead':19}: {total:+.2f} % of CPU time = {steady:+.2f} % per step "
            f"(median of paired steps) + {dry:.2f} % dry runs; target <= {target} % {verdict} "
            f"(raw totals per run {raw} %)"
        )
    print(
        f"hooks alone: {per_call:.1f} us per tracked call = "
        f"{100 * per_call / (step_ms * 1e3):.3f} % of a {step_ms:.1f} ms step"
    )
    measurements = runs[0]["tracked"].meter.measurements
    print(
        f"dry runs: first tracked call in a process {first_dry:.2f} s (one-time torch imports "
        f"included), a later new key {1e3 * later_dry:.0f} ms; {measurements} keys per run"
    )
    for name, model in (("small CNN", initial), ("ResNet-34", resnet)):
        print(
            f"hooks alone, {name:9} ({len(list(model.modules())):3} modules): "
            + ", ".join(f"{mode} {us:.1f} us" for mode, us in hooks[name].items())
            + " per call"
        )
    x_tiny = torch.randn(2, 3, 8, 8)
    for name, model, calls in (("small CNN", initial, 20), ("ResNet-34", resnet, 5)):
        plain_us, extra = call_overhead_us(model, x_tiny, calls, blocks=40 * args.repeats)
        print(
            f"end to end, {name:9} (2x3x8x8, grad on, CPU time; noisy on a busy machine): plain "
            f"{plain_us:5.0f} us, extra " + ", ".join(f"{mode} {us:+.1f} us" for mode, us in extra.items())
        )
    tracked = [loops["tracked"].meter for loops in runs]
    same = all(m.total == reference for m in tracked)
    print(
        f"FLOPs   : meter {tracked[0].total:,} ({tracked[0].source}, {measurements} dry runs), "
        f"FlopCounterMode {reference:,} -> {'identical' if same else 'DIFFERENT'}"
    )
    watched = [loops["untracked"].meter for loops in runs]
    same_watched = all((m.total, m.untracked) == (reference, reference) for m in watched)
    print(
        f"FLOPs   : untracked model, watching meter {watched[0].total:,} (all of it untracked: "
        f"{watched[0].untracked == watched[0].total}) -> {'identical' if same_watched else 'DIFFERENT'}"
    )
    return 0 if same and same_watched else 1


if __name__ == "__main__":
    raise SystemExit(main())
