"""Benchmark: the ``indep`` baseline's training throughput on one device, and what the meter costs.

Trains ``IndepLearner("resnet34")`` (the paper's low-resolution ResNet-34 at 64 px, its recipe,
its batch-size rule b = min(512, max(16, 2^floor(log2(0.0025 · D)))) for a training set of
``--train-size`` images) through ``IndepLearner.train``, so every figure is of the code a trial
runs: the batched input (:mod:`workers.learners.input_pipeline`), channels-last and bf16
autocast on CUDA (:mod:`workers.learners.acceleration`), and the FLOP meter behind
``ctx.track``. The first ``--warmup`` steps (dry runs, cuDNN's autotuning, compilation) are
left out of every timing; the device is synchronised before each clock read. Prints:

- images/s and achieved TFLOP/s, from the FLOP meter's count of the timed steps (forward and
  backward, as the service charges them);
- the fraction of the device's dense bf16 peak (model FLOPs utilisation), from a table of
  peaks by device name; an unknown device is said to be unknown;
- the input pipeline's time per step alone (batches made and discarded) against a training
  step alone (one batch, reused) and the full loop, all per step;
- the meter's overhead: the same steps with the meter and without (``ctx.track`` a no-op).

``--procs K`` trains K copies of the metered loop at once, in K processes sharing the device, as
K trials of a learner that declares ``gpus_per_worker = 1/K`` share a GPU in the service: their
timed steps start together (a barrier after the warm-up) and the figures are the device's total
(images/s, TFLOP/s, fraction of peak) and each process's step time. Small batches leave a GPU
waiting on one process's kernel launches; this measures what running several trials on it buys.

The split is ``--images`` generated originals (96 px long side, as stored for sources above
96 px, see bench/bench_input.py); the batch rule reads ``--train-size``, not the pool's size.
On CPUs, ``--steps 2 --device cpu --batch 2 --width 8 --threads 1`` runs in seconds (the CI
test); on a GPU the defaults give the figures docs/performance-input.md will quote.

Usage: .venv/bin/python bench/bench_gpu.py [--device cuda] [--steps 50] [--warmup 10]
       [--train-size 50000] [--batch B] [--width 64] [--compile [MODE]] [--procs K] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_input import make_split

from workers.learners import recipe
from workers.learners.acceleration import COMPILE_MODES, Acceleration, autocast, prepare
from workers.learners.augment import AugmentConfig
from workers.learners.indep import IndepLearner
from workers.learners.input_pipeline import TrainBatches
from workers.learners.models import ModelConfig, build_model
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.task_view import CausalTaskView

SIZE, CLASSES = 64, 100
BF16_DENSE_TFLOPS = {  # vendor data sheets, dense (no sparsity); first name contained wins
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "B200": 2250.0,
    "A100": 312.0,
    "A800": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
}


def peak_for(name: str) -> float | None:
    """The dense bf16 peak (TFLOP/s) of a device called ``name``; ``None`` when not in the table."""
    return next((peak for key, peak in BF16_DENSE_TFLOPS.items() if key in name), None)


def bf16_peak(device: str) -> tuple[str, float | None]:
    """(device name, dense bf16 peak in TFLOP/s or ``None`` when unknown)."""
    if not device.startswith("cuda"):
        return "cpu", None
    name = torch.cuda.get_device_name(torch.device(device))
    return name, peak_for(name)


def synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


@dataclass
class BenchContext:
    """A TrialContext that times the steps after the warm-up: clock and meter read at the
    warm-up's last ``progress`` call and at the last one, the device synchronised there only
    (a wait at every step would keep the host from queueing steps ahead, as a trial does)."""

    steps: int
    device: str
    metered: bool
    warmup: int
    seed: int = 0
    world_size: int = 1
    rank: int = 0
    meter: FlopMeter = field(default_factory=FlopMeter)
    marks: list[tuple[float, int]] = field(default_factory=list)
    barrier: Callable[[], None] | None = None  # the timed steps of several processes start together

    def track(self, module: Any) -> Any:
        return self.meter.track(module) if self.metered else module

    def report_flops(self, flops: int) -> None:
        self.meter.report_flops(flops)

    def progress(self, step: int, predictor: Any, *, loss: Any = None) -> None:
        if step in (self.warmup, self.steps):
            synchronise(self.device)
            if step == self.warmup and self.barrier is not None:
                self.barrier()
            self.marks.append((time.perf_counter(), self.meter.measured))

    def dev_error(self, predictor: Any) -> float | None:
        return None


def task(data: LabelledData) -> CausalTaskView:
    n = len(data)
    info = TaskInfo(
        order=0,
        key="bench",
        dataset="generated",
        title="generated",
        year=2022,
        domain=None,
        kind="single",
        num_classes=CLASSES,
        class_names=tuple(map(str, range(CLASSES))),
        image_size=SIZE,
        num_train=n,
        num_dev=0,
    )
    dev = LabelledData(np.zeros((0, SIZE, SIZE, 3), np.uint8), np.zeros(0, np.int64))
    return CausalTaskView(info, data, dev, {}, lambda order: data, stream_length=1)


def acceleration(args: argparse.Namespace) -> Acceleration:
    """The run's speed settings: the device's defaults, and torch.compile in ``--compile``'s mode."""
    return Acceleration(compile=bool(args.compile), compile_mode=args.compile or "default")


def train_loop(
    args: argparse.Namespace, data: LabelledData, batch: int, metered: bool, barrier: Callable[[], None] | None = None
) -> tuple[float, int]:
    """Seconds and meter FLOPs of the timed steps of ``IndepLearner.train``."""
    learner = IndepLearner("resnet34", width=args.width, validate_every=10**9, acceleration=acceleration(args))
    ctx = BenchContext(
        steps=args.warmup + args.steps, device=args.device, metered=metered, warmup=args.warmup, barrier=barrier
    )
    learner.train(task(data), None, {"learning_rate": 0.01, "batch_size": batch}, ctx)
    (start, flops0), (end, flops1) = ctx.marks
    return end - start, flops1 - flops0


def input_only(args: argparse.Namespace, data: LabelledData, batch: int) -> float:
    """Seconds per step of the input pipeline alone."""
    gen = torch.Generator().manual_seed(0)
    labels = torch.from_numpy(data.labels)
    batches = iter(
        TrainBatches(
            data,
            labels,
            AugmentConfig(size=SIZE),
            steps=args.warmup + args.steps,
            batch=batch,
            generator=gen,
            crops=gen,
            device=args.device,
        )
    )
    for _ in range(args.warmup):
        next(batches)
    synchronise(args.device)
    start = time.perf_counter()
    for _ in batches:
        pass
    synchronise(args.device)
    return (time.perf_counter() - start) / args.steps


def step_only(args: argparse.Namespace, batch: int) -> float:
    """Seconds per training step on one reused batch (no input work), as the learner steps."""
    accel = acceleration(args).resolve(args.device)
    model = prepare(build_model(ModelConfig("resnet34", CLASSES, args.width)).to(args.device), accel)
    optimizer = recipe.make_optimizer(model.parameters(), 0.01)
    loss_fn = recipe.make_loss("single", 0.0)
    x = torch.randn(batch, 3, SIZE, SIZE, device=args.device)
    x = x.contiguous(memory_format=torch.channels_last) if accel.channels_last else x  # as TrainBatches
    y = torch.randint(0, CLASSES, (batch,), device=args.device)
    start = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            synchronise(args.device)
            start = time.perf_counter()
        with autocast(args.device, accel):
            loss = loss_fn(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    synchronise(args.device)
    return (time.perf_counter() - start) / args.steps


def folder_barrier(folder: Path, parties: int, timeout_s: float = 600.0) -> Callable[[], None]:
    """Each of ``parties`` processes leaves a mark in ``folder`` and waits for all the others'
    (for ``timeout_s`` at most: a process that died before its mark would hold the rest forever)."""

    def wait() -> None:
        (folder / f"ready-{os.getpid()}").touch()
        deadline = time.monotonic() + timeout_s
        while len(list(folder.glob("ready-*"))) < parties:
            if time.monotonic() > deadline:
                raise SystemExit(f"waited {timeout_s:g} s for the other processes to end their warm-up")
            time.sleep(0.001)

    return wait


def child_args(args: argparse.Namespace, batch: int) -> list[str]:
    """The command line of one of ``--procs``' processes: this run's settings, one process."""
    out = [
        "--device",
        args.device,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--train-size",
        str(args.train_size),
        "--batch",
        str(batch),
        "--width",
        str(args.width),
    ]
    out += [
        *(["--images", str(args.images)] if args.images else []),
        *(["--compile", args.compile] if args.compile else []),
        *(["--threads", str(args.threads)] if args.threads else []),
    ]
    return out


def shared_device(args: argparse.Namespace, batch: int) -> list[dict[str, float]]:
    """``args.procs`` processes, each the metered loop; their seconds and FLOPs once all end."""
    folder = Path(tempfile.mkdtemp(prefix="bench-gpu-procs-"))
    command = [
        sys.executable,
        __file__,
        *child_args(args, batch),
        "--procs",
        str(args.procs),
        "--child-of",
        str(folder),
    ]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(args.procs)]
    try:
        while None in (codes := [proc.poll() for proc in procs]) or any(codes):  # one line each: no pipe fills
            if any(codes):
                raise SystemExit(f"one of the {args.procs} processes failed (exit {next(c for c in codes if c)})")
            time.sleep(0.05)
        return [json.loads(proc.stdout.read().strip().splitlines()[-1]) for proc in procs]
    finally:  # after a failure, the others would wait at the barrier
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    parser.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 10; 1 on CPUs)")
    parser.add_argument("--train-size", type=int, default=50_000, help="D in the batch-size rule")
    parser.add_argument("--batch", type=int, default=None, help="override the batch-size rule")
    parser.add_argument("--images", type=int, default=None, help="originals in the pool (default 8 batches)")
    parser.add_argument("--width", type=int, default=64, help="ResNet-34's first-stage channels (paper: 64)")
    parser.add_argument(
        "--compile",
        nargs="?",
        const="default",
        default=None,
        choices=COMPILE_MODES,
        help="torch.compile the network's children, in this mode (default: 'default'; "
        "'reduce-overhead' replays CUDA graphs)",
    )
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's)")
    parser.add_argument(
        "--procs", type=int, default=1, help="processes training at once on the device (as trials sharing a GPU)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--child-of", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.warmup is None:
        args.warmup = 10 if args.device.startswith("cuda") else 1
    if args.steps < 1 or args.warmup < 1 or args.procs < 1:
        parser.error("--steps, --warmup and --procs must be at least 1")
    rule = recipe.batch_size(args.train_size)
    batch = args.batch or rule
    if args.procs > 1 and not args.child_of:  # the processes make their own data
        name, peak = bf16_peak(args.device)
        return report_shared(args, batch, rule, name, peak, shared_device(args, batch))
    data = make_split(args.images or 8 * batch, 96)
    if args.child_of:  # one of --procs' processes: the metered loop, its figures on stdout
        seconds, flops = train_loop(args, data, batch, metered=True, barrier=folder_barrier(args.child_of, args.procs))
        print(json.dumps({"seconds": seconds, "flops": flops}))
        return
    name, peak = bf16_peak(args.device)

    seconds, flops = train_loop(args, data, batch, metered=True)
    plain_seconds, _ = train_loop(args, data, batch, metered=False)
    per_input, per_step = input_only(args, data, batch), step_only(args, batch)
    tflops = flops / seconds / 1e12
    figures: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "steps": args.steps,
        "warmup": args.warmup,
        "train_size": args.train_size,
        "batch_rule": rule,
        "batch": batch,
        "width": args.width,
        "compile": args.compile,
        "images_per_s": batch * args.steps / seconds,
        "flops_per_step": flops // args.steps,
        "tflops_per_s": tflops,
        "bf16_peak_tflops": peak,
        "mfu": None if peak is None else tflops / peak,
        "loop_s_per_step": seconds / args.steps,
        "input_s_per_step": per_input,
        "step_s_per_step": per_step,
        "input_share_of_loop": per_input / (seconds / args.steps),
        "meter_overhead": seconds / plain_seconds - 1.0,
        "procs": 1,
    }
    print(
        f"indep ResNet-34 (width {args.width}) at {SIZE} px on {name}: batch {batch} (rule for "
        f"D={args.train_size}: {rule}), {args.steps} timed steps after {args.warmup}"
    )
    print(f"  images/s             {figures['images_per_s']:.1f}")
    print(f"  achieved TFLOP/s     {tflops:.4f}  (FLOP meter: {figures['flops_per_step']:.4g} per step)")
    if name == "cpu":
        print("  fraction of bf16 peak: not computed on CPUs")
    elif peak is None:
        print(f"  fraction of bf16 peak: unknown device {name!r} (no peak in the table)")
    else:
        print(f"  fraction of bf16 peak {figures['mfu']:.1%} of {peak:.0f} TFLOP/s")
    print(
        f"  per step: loop {seconds / args.steps * 1e3:.2f} ms, input alone {per_input * 1e3:.2f} ms, "
        f"training step alone {per_step * 1e3:.2f} ms"
    )
    print(f"  FLOP meter overhead  {figures['meter_overhead']:+.1%} (same steps without the meter)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


def report_shared(
    args: argparse.Namespace, batch: int, rule: int, name: str, peak: float | None, runs: list[dict[str, float]]
) -> None:
    """The device's totals over ``--procs`` processes' common timed stretch, and each one's step."""
    slowest = max(run["seconds"] for run in runs)
    tflops = sum(run["flops"] for run in runs) / slowest / 1e12
    figures: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "steps": args.steps,
        "warmup": args.warmup,
        "train_size": args.train_size,
        "batch_rule": rule,
        "batch": batch,
        "width": args.width,
        "compile": args.compile,
        "procs": args.procs,
        "images_per_s": args.procs * batch * args.steps / slowest,
        "flops_per_step": int(runs[0]["flops"]) // args.steps,
        "tflops_per_s": tflops,
        "bf16_peak_tflops": peak,
        "mfu": None if peak is None else tflops / peak,
        "loop_s_per_step": slowest / args.steps,
        "procs_loop_s_per_step": [run["seconds"] / args.steps for run in runs],
    }
    print(
        f"indep ResNet-34 (width {args.width}) at {SIZE} px on {name}: batch {batch}, {args.procs} processes "
        f"training at once (as {args.procs} trials sharing the device), {args.steps} timed steps after {args.warmup}"
    )
    total = figures["images_per_s"]
    print(f"  images/s, all        {total:.1f} ({total / args.procs:.1f} per process)")
    print(f"  achieved TFLOP/s     {tflops:.4f}")
    if peak is not None:
        print(f"  fraction of bf16 peak {figures['mfu']:.1%} of {peak:.0f} TFLOP/s")
    print(f"  per step, each process: {', '.join(f'{s * 1e3:.2f}' for s in figures['procs_loop_s_per_step'])} ms")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
