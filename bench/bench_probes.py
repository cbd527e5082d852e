"""Benchmarks of the probes: what probing a run costs against training it, and the linear fit.

Default (``--streams mini,offline``): for each stream, in a fresh data folder, time
``nevis run --stream S --learner indep_small`` (training, wall time) and then ``nevis probe run
--submission ID`` with the ``standard`` preset and its default workers (one per core, at most 4;
wall time), and print probe / training. The
target is a ratio ≤ 1 on the same machine. ``offline`` needs ``NEVIS_OFFLINE_DATA_DIR`` (it is
skipped, saying so, without it). ``--preset full`` times METRICS.md's defaults instead.

``--linear-fit``: the batched, preconditioned linear probe against per-fold SGD from scratch.
What is compared, on the SAME features of the SAME checkpoints:
- **fast** (``workers.probe``): the k folds fitted together as one batched problem by
  full-batch L-BFGS in coordinates whitened by each fold's closed-form feature covariance
  (:mod:`workers.probe.fits.linear`);
- **reference**: the usual approach, one probe per fold retrained from scratch by
  mini-batch SGD (momentum 0.9, cosine learning rate, zero start) on the same objective
  (cross-entropy + l2/2·||W||² on per-fold standardised features).

The checkpoints are real: a small CNN (the ``indep_small`` baseline's ``small_cnn``) is trained
on a subset of CIFAR-10 from ``../shared/datasets`` and saved at several steps; each
checkpoint's penultimate features of held-apart training images are extracted once and
given to both methods. Timings are the minimum over ``--repeats`` runs (the machine may be
shared); both methods use the same number of threads.

Targets: fast ≥ 10× faster overall, held-out accuracy within ±0.5 points at every
checkpoint. The script prints the figures and exits 1 if a target is missed.

Run: .venv/bin/python bench/bench_probes.py [--streams mini] [--preset standard]
     .venv/bin/python bench/bench_probes.py --linear-fit [--steps 300 --checkpoints 0,30,100,300]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from services.store.probes.settings import ProbeSettings
from workers.learners.indep import IndepLearner
from workers.learners.protocol import LabelledData, TaskInfo
from workers.probe.fits.folds import fold_ids
from workers.probe.fits.probes import fit_probes
from workers.sandbox.context import LocalTrialContext

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SPEEDUP_TARGET = 10.0
ACCURACY_TOLERANCE = 0.5  # points


class _View:
    """The causal view the learner trains on (train split only)."""

    def __init__(self, info: TaskInfo, images: np.ndarray, labels: np.ndarray) -> None:
        self.info, self._data = info, LabelledData(images, labels)

    def train(self) -> LabelledData:
        return self._data

    def dev(self) -> LabelledData:
        return LabelledData(self._data.images[:0], self._data.labels[:0])

    def past_tasks(self) -> tuple:
        return ()

    def past_train(self, order: int) -> LabelledData:
        raise KeyError(order)


def checkpoint_features(args: argparse.Namespace) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """Train small_cnn, checkpoint it, and extract the probe images' features per checkpoint."""
    data = np.load(Path(args.dataset).with_suffix(".npz"))
    meta = json.loads(Path(args.dataset).with_suffix(".json").read_text())
    images, labels = data["images"], data["labels"]
    if images.shape[-1] == 1:
        images = np.repeat(images, 3, axis=-1)
    train = np.random.default_rng(args.seed).permutation(np.array(meta["split"]["train"]))
    fit_rows, probe_rows = train[: args.train], train[args.train : args.train + args.probe]
    classes = int(meta["num_classes"])
    info = TaskInfo(
        order=1,
        key=meta["name"],
        dataset=meta["name"],
        title=meta["name"],
        year=2000,
        domain=None,
        kind="single",
        num_classes=classes,
        class_names=tuple(str(i) for i in range(classes)),
        image_size=int(images.shape[1]),
        num_train=len(fit_rows),
        num_dev=0,
    )
    learner = IndepLearner("small_cnn")
    saved: dict[int, bytes] = {}
    steps = [int(s) for s in args.checkpoints.split(",")]
    ctx = LocalTrialContext(
        seed=args.seed,
        steps=max(steps),
        save_predictor=learner.save_predictor,
        on_checkpoint=lambda step, blob: saved.__setitem__(step, blob),
        checkpoint_at=steps,
    )
    started = time.perf_counter()
    learner.train(_View(info, images[fit_rows], labels[fit_rows]), None, {"learning_rate": args.cnn_lr}, ctx)
    print(
        f"trained small_cnn on {len(fit_rows)} {meta['name']} images for {max(steps)} steps "
        f"in {time.perf_counter() - started:.1f} s; checkpoints at {sorted(saved)}"
    )
    features = {}
    for step, blob in sorted(saved.items()):
        predictor = learner.load_predictor(blob, info, ctx)
        features[step] = learner.features(predictor, images[probe_rows], ctx)
    return features, labels[probe_rows]


def sgd_probe(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    *,
    classes: int,
    l2: float,
    epochs: int,
    batch: int,
    lr: float,
    seed: int,
) -> float:
    """The reference: one linear probe trained from scratch by SGD; held-out accuracy."""
    mu, sd = x_train.mean(0), x_train.std(0)
    sd[sd <= 1e-6 * (1 + np.abs(mu))] = 1.0
    xt = torch.as_tensor((x_train - mu) / sd, dtype=torch.float32)
    xv = torch.as_tensor((x_test - mu) / sd, dtype=torch.float32)
    yt = torch.as_tensor(y_train)
    layer = torch.nn.Linear(xt.shape[1], classes)
    torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
    optimizer = torch.optim.SGD(layer.parameters(), lr=lr, momentum=0.9)
    per_epoch = math.ceil(len(xt) / batch)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * per_epoch)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=generator)
        for start in range(0, len(xt), batch):
            rows = order[start : start + batch]
            loss = F.cross_entropy(layer(xt[rows]), yt[rows]) + 0.5 * l2 * layer.weight.pow(2).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    with torch.no_grad():
        return float((layer(xv).argmax(1).numpy() == y_test).mean())


def reference(x: np.ndarray, y: np.ndarray, ids: np.ndarray, args: argparse.Namespace, classes: int) -> float:
    """Mean held-out accuracy of k probes, each trained from scratch by SGD."""
    return float(
        np.mean(
            [
                sgd_probe(
                    x[ids != f],
                    y[ids != f],
                    x[ids == f],
                    y[ids == f],
                    classes=classes,
                    l2=args.l2,
                    epochs=args.sgd_epochs,
                    batch=args.sgd_batch,
                    lr=args.sgd_lr,
                    seed=args.seed + f,
                )
                for f in range(args.folds)
            ]
        )
    )


def timed(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def _timed_command(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall time and output of ``python -m services.cli ARGS``; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"`nevis {' '.join(args)}` failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds, done.stdout


def probe_cost(streams: list[str], *, preset: str, learner: str) -> int:
    """Train each stream, probe the run, print probe / training wall time (target ≤ 1)."""
    rows = []
    for stream in streams:
        if stream == "offline" and not os.environ.get("NEVIS_OFFLINE_DATA_DIR"):
            print("offline: skipped (set NEVIS_OFFLINE_DATA_DIR to the offline datasets)")
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-probes-{stream}-") as folder:
            env = {**os.environ, "NEVIS_DATA_DIR": folder}
            env.pop("NEVIS_DATABASE_URL", None)
            env.pop("NEVIS_STORE_URL", None)
            _timed_command(["data", "prepare", "--stream", stream], env)  # not part of training
            train_s, out = _timed_command(["run", "--stream", stream, "--learner", learner], env)
            run_id = re.search(r"Run (\d+):", out)
            if run_id is None:
                raise SystemExit(f"no run id in the output of `nevis run`:\n{out[-2000:]}")
            probe_s, out = _timed_command(["probe", "run", "--submission", run_id.group(1), "--preset", preset], env)
            finished = re.findall(r"probe jobs finished: (\d+) of", out)  # several workers
            jobs = (
                int(finished[-1]) if finished else len(re.findall(r"^\s+(checkpoint|trial|summary)\s", out, flags=re.M))
            )
            rows.append((stream, train_s, probe_s, jobs))
            print(
                f"{stream}: training {train_s:.1f} s, probing ({preset}) {probe_s:.1f} s "
                f"({jobs} jobs), ratio {probe_s / train_s:.2f}",
                flush=True,
            )
    print(f"\n{'stream':<10} {'train s':>9} {'probe s':>9} {'jobs':>5} {'probe/train':>12}")
    for stream, train_s, probe_s, jobs in rows:
        print(f"{stream:<10} {train_s:>9.1f} {probe_s:>9.1f} {jobs:>5} {probe_s / train_s:>12.2f}")
    ok = all(p <= t for _, t, p, _ in rows)
    print(f"target probe/train <= 1: {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


def main() -> int:
    if "--linear-fit" not in sys.argv[1:]:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--streams", default="mini,offline", help="comma list of streams")
        parser.add_argument("--preset", default="standard", help="probe preset")
        parser.add_argument("--learner", default="indep_small")
        args = parser.parse_args()
        return probe_cost([s for s in args.streams.split(",") if s], preset=args.preset, learner=args.learner)
    sys.argv.remove("--linear-fit")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default=str(DATASETS / "cifar10"), help="npz + json, without suffix")
    parser.add_argument("--train", type=int, default=3000, help="images the CNN trains on")
    parser.add_argument("--probe", type=int, default=2000, help="images the probes use")
    parser.add_argument("--checkpoints", default="0,30,100,300", help="training steps to save")
    parser.add_argument("--cnn-lr", type=float, default=0.05)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=1e-2, help="the probes' L2 penalty (both methods)")
    parser.add_argument("--sgd-epochs", type=int, default=50)
    parser.add_argument("--sgd-batch", type=int, default=64)
    parser.add_argument("--sgd-lr", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (minimum counts)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    features, labels = checkpoint_features(args)
    classes = int(labels.max()) + 1
    settings = ProbeSettings(
        folds=args.folds, kinds=("linear",), linear_l2=args.l2, max_examples=len(labels), seed=args.seed
    )
    ids = fold_ids(labels, args.folds, seed=args.seed)
    fit_probes(
        features[min(features)][:50], labels[:50], num_classes=classes, settings=settings.with_changes(folds=2)
    )  # warm-up: imports, thread pools
    print(
        f"\nlinear probes, {args.folds} folds, {len(labels)} examples, d = "
        f"{features[min(features)].shape[1]}, {classes} classes, l2 = {args.l2}, "
        f"{args.threads} thread(s); reference: SGD {args.sgd_epochs} epochs, batch {args.sgd_batch}"
    )
    print(f"{'step':>6} {'fast acc':>9} {'SGD acc':>9} {'diff':>6} {'fast s':>8} {'SGD s':>8} {'speed-up':>9}")
    total_fast = total_ref = worst = 0.0
    for step, x in features.items():
        fast_s, scores = timed(
            lambda: fit_probes(x, labels, num_classes=classes, settings=settings)["linear"],  # noqa: B023
            args.repeats,
        )
        ref_s, ref_acc = timed(lambda: reference(x, labels, ids, args, classes), 1)  # noqa: B023
        fast_acc = scores.accuracy
        diff = 100 * (fast_acc - ref_acc)
        worst = max(worst, abs(diff))
        total_fast, total_ref = total_fast + fast_s, total_ref + ref_s
        print(
            f"{step:>6} {100 * fast_acc:>9.2f} {100 * ref_acc:>9.2f} {diff:>+6.2f} "
            f"{fast_s:>8.3f} {ref_s:>8.3f} {ref_s / fast_s:>8.1f}x"
        )
    speedup = total_ref / total_fast
    print(f"{'total':>6} {'':>9} {'':>9} {'':>6} {total_fast:>8.3f} {total_ref:>8.3f} {speedup:>8.1f}x")
    ok = speedup >= SPEEDUP_TARGET and worst <= ACCURACY_TOLERANCE
    print(
        f"\nspeed-up {speedup:.1f}x (target >= {SPEEDUP_TARGET:g}x); largest accuracy gap "
        f"{worst:.2f} points (target <= {ACCURACY_TOLERANCE}): {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
