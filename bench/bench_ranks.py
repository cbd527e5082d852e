"""Benchmark: workers.probe.scores.probe_metrics.lidar / rankme against a plain numpy transcription.

The plain versions below follow METRICS.md §3 line by line, with no shortcuts. For each
case the script times both (interleaved, several repeats, the minimum counts: the machine
may be shared), and prints the wall times, the ratio library / plain (target: <= 1, i.e.
not slower) and the absolute difference of the results (target: <= 1e-9). It exits 1 if a
difference exceeds the target.

Run: .venv/bin/python bench/bench_ranks.py [--n 1000 --q 50 --d 512 --repeats 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable

import numpy as np

from workers.probe.scores.probe_metrics import lidar, rankme

TOLERANCE = 1e-9


def plain_lidar(e: np.ndarray, delta: float = 1e-4, eps: float = 1e-8) -> float:
    n, q, d = e.shape
    mu_i = e.mean(axis=1)
    mu = mu_i.mean(axis=0)
    sigma_b = (mu_i - mu).T @ (mu_i - mu) / (n - 1)
    centred = (e - mu_i[:, None, :]).reshape(n * q, d)
    sigma_w = centred.T @ centred / (n * (q - 1)) + delta * np.eye(d)
    w, v = np.linalg.eigh(sigma_w)
    inv_sqrt = v @ np.diag(w**-0.5) @ v.T
    lam = np.clip(np.linalg.eigvalsh(inv_sqrt @ sigma_b @ inv_sqrt), 0.0, None)
    p = lam / lam.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def plain_rankme(z: np.ndarray, eps: float = 1e-7) -> float:
    s = np.linalg.svd(z, compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def make_embeddings(n: int, q: int, d: int, seed: int) -> np.ndarray:
    """Samples with a decaying spectrum, seen under q noisy views each."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(1.0 + np.arange(d) / 16.0)
    centres = rng.standard_normal((n, 1, d)) * scale
    return centres + 0.5 * rng.standard_normal((n, q, d))


def collapsed(z: np.ndarray, rank: int, seed: int) -> np.ndarray:
    """The same rows pushed onto a rank-``rank`` subspace plus tiny noise (ill-conditioned)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((z.shape[1], rank)))
    return (z @ basis) @ basis.T + 1e-6 * rng.standard_normal(z.shape)


def best_of(library: Callable[[], float], plain: Callable[[], float], repeats: int):
    """Interleaved runs; the minimum wall and CPU (all threads) seconds of each, and values."""
    best = {"lib": [math.inf, math.inf], "plain": [math.inf, math.inf]}
    values = {}
    for _ in range(repeats):
        for key, func in (("lib", library), ("plain", plain)):
            wall, cpu = time.perf_counter(), time.process_time()
            values[key] = func()
            best[key][0] = min(best[key][0], time.perf_counter() - wall)
            best[key][1] = min(best[key][1], time.process_time() - cpu)
    return best["lib"], best["plain"], values["lib"], values["plain"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--q", type=int, default=50)
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    e = make_embeddings(args.n, args.q, args.d, args.seed)
    z = e.reshape(-1, args.d)
    z_low = collapsed(z, rank=args.d // 8, seed=args.seed + 1)
    cases = [
        (f"lidar  (n={args.n}, q={args.q}, d={args.d})", lambda: lidar(e), lambda: plain_lidar(e)),
        (f"rankme (N={z.shape[0]}, d={args.d})", lambda: rankme(z), lambda: plain_rankme(z)),
        (f"rankme, rank {args.d // 8} + noise (SVD route)", lambda: rankme(z_low), lambda: plain_rankme(z_low)),
    ]
    print(f"min of {args.repeats} interleaved runs; numpy {np.__version__}; CPU s = all threads")
    print(
        f"{'case':44s} {'library s':>9s} {'plain s':>8s} {'ratio':>5s} {'CPU ratio':>9s} {'value':>11s} {'|diff|':>8s}"
    )
    worst = 0.0
    for label, library, plain in cases:
        (t_lib, c_lib), (t_plain, c_plain), v_lib, v_plain = best_of(library, plain, args.repeats)
        diff = abs(v_lib - v_plain)
        worst = max(worst, diff)
        ratios = f"{t_lib / t_plain:5.2f} {c_lib / c_plain:9.2f}"
        print(f"{label:44s} {t_lib:9.3f} {t_plain:8.3f} {ratios} {v_lib:11.5f} {diff:8.1e}")
    verdict = "met" if worst <= TOLERANCE else "NOT met"
    print(f"max |diff| = {worst:.1e} (target <= {TOLERANCE:g}: {verdict})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
