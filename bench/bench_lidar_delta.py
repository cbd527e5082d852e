"""Benchmark: how much LiDAR owes to δ, absolute against relative (docs/probes.md, "LiDAR's δ").

Real features: n CIFAR-10 images (the offline datasets folder) under q training crops
(``workers.sandbox.views.augment_views``, the baselines' crop and flip), through a freshly
initialised network of the given architecture (seed 0). Prints LiDAR at each δ, absolute and
relative (δ × tr(Σ_w)/d), on the features and on the same features × 100: the relative
values do not move with that scale, the absolute ones do.

Run: .venv/bin/python bench/bench_lidar_delta.py [--model small_cnn --n 150 --q 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from workers.learners.augment import AugmentConfig, eval_transform
from workers.learners.models import ModelConfig, build_model
from workers.probe.scores.probe_metrics import lidar_at_deltas
from workers.sandbox.views import augment_views

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "cifar10.npz"
DELTAS = (1e-6, 1e-4, 1e-2)


def features(model_name: str, n: int, q: int, data: Path) -> np.ndarray:
    """(n, q, d) embeddings of n seeded CIFAR-10 images under q training crops each."""
    images = np.load(data)["images"]
    picked = images[np.random.default_rng(0).choice(len(images), n, replace=False)]
    cfg = AugmentConfig(size=int(picked.shape[1]))
    views, _ = augment_views(object(), SimpleNamespace(augment=cfg), picked, q, seed=0)
    torch.manual_seed(0)
    model = build_model(ModelConfig(model_name, 10, None)).eval()
    flat = views.reshape(-1, *picked.shape[1:])
    with torch.no_grad():
        out = [
            model.features(eval_transform(flat[i : i + 200], cfg)).flatten(1).numpy() for i in range(0, len(flat), 200)
        ]
    return np.concatenate(out).reshape(n, q, -1).astype(np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--q", type=int, default=8)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    torch.set_num_threads(1)
    e = features(args.model, args.n, args.q, args.data)
    print(f"{args.model}: n={args.n}, q={args.q}, d={e.shape[-1]}")
    for factor in (1.0, 100.0):
        absolute, _ = lidar_at_deltas(e * factor, DELTAS, relative=False)
        relative, scale = lidar_at_deltas(e * factor, DELTAS, relative=True)
        row = lambda values: " / ".join(f"{values[d]:.1f}" for d in DELTAS)  # noqa: E731
        print(
            f"features x{factor:g}: absolute δ {DELTAS}: {row(absolute)};  "
            f"relative (tr(Σ_w)/d = {scale:.3g}): {row(relative)}"
        )


if __name__ == "__main__":
    main()
