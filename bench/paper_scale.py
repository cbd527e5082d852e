"""Scale on paper: the wall time and cost of one FULL-stream run at the NEVIS'22 paper's budget on
N GPUs, from a measured FLOP count per image, the stream's task sizes and the coordinator's
measured figures. An estimate, printed as a table; nothing here runs on a GPU.

The model of one submission (the ``nevis22-full`` stream, 106 tasks):

- **Per task, per trial**: ``--steps`` updates (the paper: up to 50,000) at the baselines'
  batch b = min(512, max(16, 2^floor(log2(0.0025 · D)))) for a train split of D images
  (:func:`workers.learners.recipe.batch_size`), so ``steps · b`` training images; plus a dev
  pass every 1,000 steps below the budget and the harness's dev pass (``IndepLearner``'s
  ``validate_every``, docs/fidelity.md B3 / F1), forward only; plus one test prediction of the
  chosen trial per task.
- **FLOPs per image**: ResNet-34 at 64 px (``build_model(ModelConfig("resnet34", C))``)
  counted by the service's FLOP meter (:class:`workers.sandbox.metering.flops.FlopMeter`) over one
  training step on the CPU, at run time: forward and backward for a training image, forward
  for an evaluated one. The head's share depends on C, so it is measured at two class counts
  and interpolated.
- **GPU throughput**: ``--gpu-images-per-s`` training images per second per GPU, or the
  ``images_per_s`` of a ``bench/bench_gpu.py --json`` file (``--gpu-json``). Given several such
  files at different batch sizes (``bench/gpu_checks.sh`` writes them at b = 16, 64 and 512), a
  training step takes the time measured at its batch size instead: linear between measured
  sizes, the smallest's time below them, the largest's time per image above. Default: the
  issue's figure, an H200 at 40 % of its 989 TFLOP/s dense bf16 peak over the meter's count
  per training image (~14,000 images/s), **an assumption**, not a measurement. Evaluation runs
  at the same FLOP rate. Small batches (b = 16 for most tasks) seldom reach a large batch's
  rate: ``--min-step-ms`` puts a floor under a training step (default 0, the FLOP rate alone).
- **Trials sharing a GPU**: runs of ``bench_gpu.py --procs K`` measured K processes training at
  once on one GPU, as the service runs K trials of a learner that declares
  ``gpus_per_worker = 1/K``; given such runs (all of one K), each GPU holds K trials and a step
  takes its time measured with K sharing.
- **Spread over N GPUs**: a task's ``--trials`` trials (the paper: 16) run side by side, K per
  GPU (1 unless measured otherwise), in ceil(trials / (N K)) waves; tasks run one after another,
  because the coordinator launches task i only after task i-1 is committed (the causal order).
  So one submission uses at most ceil(trials / K) GPUs; more GPUs serve other submissions.
- **Per-task overheads**: the coordinator's launch delay (``--launch-delay-s``: eligible to
  launched for a task with nothing queued ahead of it, bench/scale_sim.py's first-submission
  p99) and the orchestration per task: a worker process's start and its first task
  (``--orchestration-s``: imports, connecting, the run's actors and sandboxed hosts, data,
  evaluation, commit; bench/bench_task_process.py's 7.6 s on a running Ray cluster), paid once
  per launch, and a continued task's (``--continued-s``: 0.4 s, the same script), since a worker
  goes on with up to ``--worker-max-tasks`` (``NEVIS_WORKER_MAX_TASKS``, 16) tasks of a
  submission that nobody else waits behind. The coordinator's scheduling rate (``--transitions-per-min``,
  bench/scale_sim.py, 6 transitions per task) bounds how many GPUs a fleet of submissions can
  keep busy; it is printed against the GPUs one task keeps busy.

Task sizes: the project's manifests leave ``num_examples`` empty for the FULL stream (the size
is known once a dataset is prepared), so every size (``bench/dataset_sizes.py``) is **an estimate**: a public figure
for the whole dataset, rounded, times the train fraction of the manifest's split (0.7 where
the split names none). ``--sizes FILE`` (JSON ``{"dataset": images}``) replaces any of them,
e.g. with prepared counts. A size only matters through the batch rule's power of two.

Usage::

    .venv/bin/python bench/paper_scale.py                     # the paper's budget, N = 1, 8, 64
    .venv/bin/python bench/paper_scale.py --gpu-json gpu.json --price 3.5 --json out.json
    .venv/bin/python bench/paper_scale.py --gpu-json gpu_b16.json gpu_b64.json gpu_b512.json
    .venv/bin/python bench/paper_scale.py --gpu-json gpu_b16_x4.json gpu_b64_x4.json  # 4 trials per GPU
    .venv/bin/python bench/paper_scale.py --steps 100 --tasks 3 --width 8 --image-size 16  # seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F

from workers.learners.models import ModelConfig, build_model
from workers.learners.recipe import batch_size
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.manifest_files import load_stream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_sizes import APPROX_IMAGES, FALLBACK_IMAGES
from gpu_runs import hours, measured_step_s, read_steps_by_batch, trials_per_gpu

STREAM = "nevis22-full"
PAPER_STEPS, PAPER_TRIALS = 50_000, 16
VALIDATE_EVERY = 1000  # IndepLearner's validate_every, the reference's
H200_BF16_PEAK_TFLOPS = 989.0
ASSUMED_MFU = 0.40
DEFAULT_TRAIN_FRACTION = 0.7
DEFAULT_DEV_FRACTION = 0.12
TRANSITIONS_PER_TASK = 6  # lease claimed, launched, started, ended; task run started, committed

# Measured figures quoted in docs/benchmarks.md (the defaults; pass newer ones).
SCALE_SIM_TRANSITIONS_PER_MIN = 14_065.0  # bench/scale_sim.py, 1,000 x 106, 3 replicas, 2026-12-05, load 6-13
SCALE_SIM_LAUNCH_DELAY_S = (
    0.21  # the same run: a task with nothing queued ahead (a user's first) launched by 0.213 s, p99
)
TASK_PROCESS_ORCHESTRATION_S = 7.6  # bench/bench_task_process.py --modes coordinator, 2026-12-06 at e95aa5b (quiet, 2 cores): the scheduler and a worker process per task on a running Ray cluster, previous lease's end to this one's less training, median of 5 mini tasks (launch, imports, connect, actors and sandboxed hosts, data, evaluation, commit)
CONTINUED_TASK_S = 0.4  # the same run with workers that go on: a continued task's, median of 4
WORKER_MAX_TASKS = 16  # NEVIS_WORKER_MAX_TASKS's default


@dataclass(frozen=True)
class TaskCost:
    order: int
    dataset: str
    images: int
    size_source: str  # "estimate" | "given"
    train: int
    batch: int
    train_images_per_trial: int
    eval_images_per_trial: int
    eval_images_chosen: int  # the chosen trial's test prediction
    trial_s: float  # one trial, on its GPU or its share of one
    task_gpu_s: float  # GPU time of every trial of the task, plus the chosen trial's prediction
    trials_per_gpu: int = 1


@dataclass(frozen=True)
class Row:
    gpus: int
    waves: int
    wall_h: float
    gpu_hours_busy: float
    gpu_hours_held: float
    cost_held: float
    cost_busy: float
    overhead_share: float
    bound: str


def measure_flops(*, width: int | None, image_size: int, classes: int) -> tuple[int, int, float]:
    """(forward, backward) FLOPs per image of one training step of ResNet-34 with ``classes``
    outputs, counted by the service's meter on the CPU; and the step's seconds."""
    torch.manual_seed(0)
    model = build_model(ModelConfig("resnet34", classes, width=width))
    meter = FlopMeter()
    meter.track(model)
    batch = 2  # BatchNorm in train mode wants more than one image
    x = torch.randn(batch, 3, image_size, image_size)
    y = torch.randint(0, classes, (batch,))
    start = time.perf_counter()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    seconds = time.perf_counter() - start
    counts = meter.snapshot()
    meter.untrack_all()
    return counts.forward // batch, counts.backward // batch, seconds


def flops_per_image(*, width: int | None, image_size: int, class_counts: list[int]) -> dict[str, Any]:
    """The meter's counts at two class counts; a linear fit in the head's size for the rest."""
    low, high = min(class_counts), max(class_counts)
    fwd_lo, bwd_lo, s_lo = measure_flops(width=width, image_size=image_size, classes=low)
    if high == low:
        fwd_hi, bwd_hi, s_hi = fwd_lo, bwd_lo, 0.0
    else:
        fwd_hi, bwd_hi, s_hi = measure_flops(width=width, image_size=image_size, classes=high)
    return {
        "classes": [low, high],
        "forward": [fwd_lo, fwd_hi],
        "backward": [bwd_lo, bwd_hi],
        "cpu_step_s": [round(s_lo, 3), round(s_hi, 3)],
    }


def _at(pair: list[int], classes: list[int], c: int) -> float:
    if classes[1] == classes[0]:
        return float(pair[0])
    return pair[0] + (pair[1] - pair[0]) * (c - classes[0]) / (classes[1] - classes[0])


def _fractions(task: Any) -> tuple[float, float]:
    fractions = (task.split.fractions or {}) if task.split is not None else {}
    return (float(fractions.get("train", DEFAULT_TRAIN_FRACTION)), float(fractions.get("dev", DEFAULT_DEV_FRACTION)))


def task_costs(
    tasks: list[Any],
    *,
    flops: dict[str, Any],
    steps: int,
    trials: int,
    flops_per_gpu_s: float,
    sizes: dict[str, int],
    min_step_s: float = 0.0,
    step_s: Callable[[int], float] | None = None,
    trials_per_gpu: int = 1,
) -> list[TaskCost]:
    """Every task's images and GPU seconds at the budget (see the module's docstring); with
    ``step_s``, a training step takes the time measured at its batch size, with
    ``trials_per_gpu`` trials sharing each GPU (its GPU time is a trial's share of it)."""
    out = []
    for task in tasks:
        key = task.dataset.split(":", 1)[-1]
        given = key in sizes
        images = sizes.get(key) or APPROX_IMAGES.get(key, FALLBACK_IMAGES)
        train_frac, dev_frac = _fractions(task)
        train = max(1, int(images * train_frac))
        dev = max(1, int(images * dev_frac))
        test = max(1, int(images * 0.2))
        b = batch_size(train)
        classes = task.num_classes or 10
        fwd = _at(flops["forward"], flops["classes"], classes)
        bwd = _at(flops["backward"], flops["classes"], classes)
        validations = max(0, math.ceil(steps / VALIDATE_EVERY) - 1) + 1  # below the budget + the harness's
        train_images = steps * b
        eval_images = validations * dev
        at_rate = steps * step_s(b) if step_s is not None else train_images * (fwd + bwd) / flops_per_gpu_s
        train_s = max(at_rate, steps * min_step_s)
        trial_s = train_s + eval_images * fwd / (flops_per_gpu_s / trials_per_gpu)  # its share of the GPU
        predict_s = test * fwd / flops_per_gpu_s
        out.append(
            TaskCost(
                order=task.order,
                dataset=key,
                images=images,
                size_source="given" if given else "estimate",
                train=train,
                batch=b,
                train_images_per_trial=train_images,
                eval_images_per_trial=eval_images,
                eval_images_chosen=test,
                trial_s=trial_s,
                task_gpu_s=trials * trial_s / trials_per_gpu + predict_s,
                trials_per_gpu=trials_per_gpu,
            )
        )
    return out


def table(
    costs: list[TaskCost], *, gpus: list[int], trials: int, per_task_overhead_s: float, price: float
) -> list[Row]:
    """One row per GPU count: one submission's wall time, its GPU-hours and cost."""
    busy_s = sum(c.task_gpu_s for c in costs)
    per_gpu = costs[0].trials_per_gpu if costs else 1
    used = math.ceil(trials / per_gpu)  # the most GPUs one submission's task keeps busy
    sharing = "one trial per GPU" if per_gpu == 1 else f"{per_gpu} trials per GPU"
    rows = []
    for n in gpus:
        waves = math.ceil(trials / (n * per_gpu))
        compute_s = sum(waves * c.trial_s + (c.task_gpu_s - trials * c.trial_s / per_gpu) for c in costs)
        overhead_s = per_task_overhead_s * len(costs)
        wall_s = compute_s + overhead_s
        held_h = n * wall_s / 3600
        if n >= used:
            bound = (
                f"causal order: {sharing}, tasks one after another; {n - used} of {n} GPUs idle for this submission"
                if n > used
                else f"causal order: {sharing}, tasks one after another"
            )
        else:
            bound = f"trials: {trials} per task in {waves} waves of {n * per_gpu}"
        rows.append(
            Row(
                gpus=n,
                waves=waves,
                wall_h=wall_s / 3600,
                gpu_hours_busy=busy_s / 3600,
                gpu_hours_held=held_h,
                cost_held=held_h * price,
                cost_busy=busy_s / 3600 * price,
                overhead_share=overhead_s / wall_s,
                bound=bound,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1,8,64", help="GPU counts, comma-separated")
    parser.add_argument("--steps", type=int, default=PAPER_STEPS, help="updates per trial")
    parser.add_argument("--trials", type=int, default=PAPER_TRIALS, help="trials per task")
    parser.add_argument("--tasks", type=int, default=None, help="the first N tasks of the stream only")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--width", type=int, default=None, help="ResNet width (default the model's)")
    parser.add_argument(
        "--gpu-images-per-s",
        type=float,
        default=None,
        help="training images/s of one GPU (default: H200 at 40%% of bf16 peak, assumed)",
    )
    parser.add_argument(
        "--gpu-json",
        type=Path,
        nargs="+",
        help="bench/bench_gpu.py --json output: its images_per_s; several at different "
        "batch sizes: each step's measured time at its batch size",
    )
    parser.add_argument("--price", type=float, default=3.0, help="$ per GPU-hour")
    parser.add_argument(
        "--transitions-per-min",
        type=float,
        default=SCALE_SIM_TRANSITIONS_PER_MIN,
        help="the coordinator's measured scheduling rate (bench/scale_sim.py)",
    )
    parser.add_argument(
        "--launch-delay-s",
        type=float,
        default=SCALE_SIM_LAUNCH_DELAY_S,
        help="eligible -> launched per task (bench/scale_sim.py)",
    )
    parser.add_argument(
        "--orchestration-s",
        type=float,
        default=TASK_PROCESS_ORCHESTRATION_S,
        help="a worker process's start and first task beyond training (bench/bench_task_process.py)",
    )
    parser.add_argument(
        "--continued-s",
        type=float,
        default=CONTINUED_TASK_S,
        help="a task a running worker goes on with, beyond training (bench/bench_task_process.py)",
    )
    parser.add_argument(
        "--worker-max-tasks",
        type=int,
        default=WORKER_MAX_TASKS,
        help="tasks one worker runs in a row (NEVIS_WORKER_MAX_TASKS; 1: a process per task)",
    )
    parser.add_argument(
        "--min-step-ms",
        type=float,
        default=0.0,
        help="a training step's floor on the GPU (small batches do not fill it; default 0: the FLOP rate alone)",
    )
    parser.add_argument("--sizes", type=Path, help='JSON {"dataset": images} replacing the estimates')
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    gpus = [int(g) for g in args.gpus.split(",") if g.strip()]
    if not gpus or min(gpus) < 1 or args.steps < 1 or args.trials < 1:
        parser.error("--gpus, --steps and --trials must be >= 1")

    tasks = list(load_stream(STREAM).tasks)[: args.tasks or None]
    sizes = json.loads(args.sizes.read_text()) if args.sizes else {}
    flops = flops_per_image(
        width=args.width, image_size=args.image_size, class_counts=[t.num_classes or 10 for t in tasks]
    )
    train_image_flops = _at(flops["forward"], flops["classes"], 100) + _at(flops["backward"], flops["classes"], 100)
    step_s, steps_by_batch, per_gpu = None, {}, 1
    if args.gpu_json:
        runs = [json.loads(path.read_text()) for path in args.gpu_json]
        per_gpu = trials_per_gpu(parser, runs)
        largest = max(runs, key=lambda run: run.get("batch", 0))
        gpu_ips = float(largest["images_per_s"])  # the GPU's, over every process sharing it
        gpu_source = f"measured ({', '.join(map(str, args.gpu_json))})"
        if len(runs) > 1 or per_gpu > 1:  # a shared GPU: a trial's step is the time measured with K sharing
            steps_by_batch = read_steps_by_batch(parser, args.gpu_json, runs)
            step_s = measured_step_s(steps_by_batch)
    elif args.gpu_images_per_s is not None:
        gpu_ips, gpu_source = args.gpu_images_per_s, "given (--gpu-images-per-s)"
    else:
        gpu_ips = ASSUMED_MFU * H200_BF16_PEAK_TFLOPS * 1e12 / train_image_flops
        gpu_source = f"ASSUMED: H200 at {ASSUMED_MFU:.0%} of {H200_BF16_PEAK_TFLOPS:g} TFLOP/s bf16"
    flops_per_gpu_s = gpu_ips * train_image_flops
    costs = task_costs(
        tasks,
        flops=flops,
        steps=args.steps,
        trials=args.trials,
        flops_per_gpu_s=flops_per_gpu_s,
        sizes=sizes,
        min_step_s=args.min_step_ms / 1000,
        step_s=step_s,
        trials_per_gpu=per_gpu,
    )
    launches = math.ceil(len(costs) / args.worker_max_tasks)
    overhead = (
        launches * (args.launch_delay_s + args.orchestration_s) + (len(costs) - launches) * args.continued_s
    ) / len(costs)
    rows = table(costs, gpus=gpus, trials=args.trials, per_task_overhead_s=overhead, price=args.price)

    launches_per_min = args.transitions_per_min / TRANSITIONS_PER_TASK
    mean_task_gpu_s = sum(c.task_gpu_s for c in costs) / len(costs)
    mean_trial_s = sum(c.trial_s for c in costs) / len(costs)
    fed_gpus = launches_per_min / 60 * mean_task_gpu_s  # Little's law: launches/s x GPU-s per task
    estimated = sum(c.size_source == "estimate" for c in costs)
    batches: dict[int, int] = {}
    for c in costs:
        batches[c.batch] = batches.get(c.batch, 0) + 1

    print(
        f"One {STREAM} submission ({len(costs)} tasks) at {args.trials} trials x {args.steps:,} steps, "
        f"ResNet-34 at {args.image_size} px" + (f" (width {args.width})" if args.width else "")
    )
    print(
        f"  FLOPs per image (the service's meter, one CPU step, {flops['classes'][1]} classes): "
        f"forward {flops['forward'][1]:.3e}, backward {flops['backward'][1]:.3e} (measured)"
    )
    print(f"  GPU: {gpu_ips:,.0f} training images/s = {flops_per_gpu_s / 1e12:.0f} TFLOP/s per GPU [{gpu_source}]")
    print(
        f"  task sizes: {estimated} of {len(costs)} estimated (public figures; manifests carry none), "
        f"{len(costs) - estimated} given; batches by the rule: "
        + ", ".join(f"b={b}: {n}" for b, n in sorted(batches.items()))
    )
    print(
        f"  per task: {overhead:.2f} s of overhead on average: {launches} worker launches (launch delay "
        f"{args.launch_delay_s:g} s + a process's start and first task {args.orchestration_s:g} s), the other "
        f"{len(costs) - launches} tasks continued ({args.continued_s:g} s each; measured on CPUs: scale_sim, "
        f"bench_task_process); mean trial {hours(mean_trial_s / 3600)} on "
        + ("one GPU" if per_gpu == 1 else f"a 1/{per_gpu} share of a GPU")
    )
    if steps_by_batch:
        print(
            "  a training step takes its measured time at its batch size: "
            + ", ".join(f"b={b}: {t * 1e3:.2f} ms" for b, t in sorted(steps_by_batch.items()))
            + (f" with {per_gpu} processes sharing the GPU" if per_gpu > 1 else "")
            + " (bench_gpu.py; linear between, the largest's time per image above)"
        )
    if args.min_step_ms:
        print(f"  a training step takes at least {args.min_step_ms:g} ms (assumed floor for small batches)")
    elif not steps_by_batch:
        print("  every step at the FLOP rate above, small batches too (optimistic for b = 16: see --min-step-ms)")
    sharing = "1 GPU each" if per_gpu == 1 else f"{per_gpu} per GPU, as measured"
    print(f"  trials of a task run side by side ({sharing}); tasks run one after another (causal order)")
    print()
    print(
        f"| GPUs | waves per task | wall time | GPU-hours busy | GPU-hours held | cost held (${args.price:g}/GPU-h) | overhead share | bound |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r.gpus} | {r.waves} | {hours(r.wall_h)} | {r.gpu_hours_busy:,.0f} | {r.gpu_hours_held:,.0f} | "
            f"${r.cost_held:,.0f} | {r.overhead_share:.2%} | {r.bound} |"
        )
    print()
    print(
        f"Scheduling: the coordinator's {args.transitions_per_min:,.0f} transitions/min "
        f"({launches_per_min:,.0f} task launches/min at {TRANSITIONS_PER_TASK} per task) would keep "
        f"~{fed_gpus:,.0f} GPUs busy at {hours(mean_task_gpu_s / 3600)} GPU time per task: "
        f"scheduling is not the bound; the trials and the causal order are."
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "stream": STREAM,
                    "tasks": len(costs),
                    "steps": args.steps,
                    "trials": args.trials,
                    "image_size": args.image_size,
                    "width": args.width,
                    "flops": flops,
                    "train_image_flops": train_image_flops,
                    "gpu_images_per_s": gpu_ips,
                    "gpu_source": gpu_source,
                    "per_task_overhead_s": overhead,
                    "min_step_ms": args.min_step_ms,
                    "trials_per_gpu": per_gpu,
                    "step_s_by_batch": {str(b): t for b, t in sorted(steps_by_batch.items())},
                    "transitions_per_min": args.transitions_per_min,
                    "gpus_fed_by_scheduler": fed_gpus,
                    "price": args.price,
                    "rows": [asdict(r) for r in rows],
                    "task_costs": [asdict(c) for c in costs],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
