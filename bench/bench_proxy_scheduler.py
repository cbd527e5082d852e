"""Benchmark: the ``proxy`` trial scheduler (ASHA's rule on LiDAR, no labels) against ASHA
(on dev error) and FIFO (no stopping), at the same budget on tasks of the ``offline`` stream.

Each scheduler runs the same seeded search (so the same trials' configs and seeds) over the
first ``--tasks`` tasks of the offline stream (meta-train phase, scored on dev-test), in a
fresh database under ``--data-dir``. Prints, per scheduler: E, cFLOP, FLOPs saved against FIFO,
trials stopped, tasks that commit FIFO's trial, wall time; and ``uptime``'s load.

Run: .venv/bin/python bench/bench_proxy_scheduler.py [--tasks 1,2,7 --trials 6 --steps 48]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from sqlalchemy import select

REPO = Path(__file__).resolve().parents[1]


def subset_manifest(orders: list[int], out: Path) -> Path:
    """The offline stream's tasks ``orders``, renumbered 1.. in the same order."""
    doc = json.loads((REPO / "workers/stream/manifests/offline.json").read_text())
    tasks = [t for t in doc["tasks"] if t["order"] in orders]
    doc["tasks"] = [{**t, "order": i + 1} for i, t in enumerate(tasks)]
    doc["name"], doc["version"] = "offline-proxy-bench", f"1.0-{'-'.join(map(str, orders))}"
    out.write_text(json.dumps(doc))
    return out


def run_one(scheduler: str, args: argparse.Namespace, manifest: Path) -> dict:
    from services.core.budget import RunBudget
    from services.core.config import get_settings
    from services.store.db import upgrade
    from services.store.db.models import TaskResult, TaskRun, Trial
    from workers.trainer.run_plan import RunRequest
    from workers.trainer.stream_runner import StreamRunner

    os.environ["NEVIS_DATABASE_URL"] = f"sqlite:///{args.data_dir / f'{scheduler}.sqlite'}"
    get_settings.cache_clear()
    upgrade(get_settings().database_url)
    runner = StreamRunner(get_settings())
    budget = RunBudget(
        trials=args.trials, steps=args.steps, seed=args.seed, scheduler=scheduler, checkpoint_fractions=(1.0,)
    )
    started = time.perf_counter()
    run_id = runner.start(RunRequest(stream=str(manifest), learner=args.learner, phase="meta_train", budget=budget))
    wall = time.perf_counter() - started
    with runner.sessions() as session:
        results = session.scalars(select(TaskResult).where(TaskResult.submission_id == run_id)).all()
        trials = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == run_id)).all()
        chosen = {r.task_run_id: next(t.trial_index for t in trials if t.id == r.best_trial_id) for r in results}
        by_task = [chosen[r.task_run_id] for r in sorted(results, key=lambda r: r.stream_task_id)]
        out = {
            "scheduler": scheduler,
            "tasks": len(results),
            "E": sum(r.error for r in results) / len(results),
            "cflop": sum(r.flops for r in results),
            "stopped": sum(t.status == "stopped" for t in trials),
            "trials": len(trials),
            "chosen": by_task,
            "wall_s": wall,
        }
    runner.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="1,2,7", help="orders of offline-stream tasks")
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learner", default="indep_small")
    parser.add_argument("--schedulers", default="fifo,asha,proxy")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/nevis-bench-proxy"))
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["NEVIS_DATA_DIR"] = str(args.data_dir)
    os.environ.setdefault("NEVIS_OFFLINE_DATA_DIR", str(REPO.parent / "shared" / "datasets"))
    manifest = subset_manifest([int(o) for o in args.tasks.split(",")], args.data_dir / "offline-subset.json")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    print(
        f"commit {commit}; offline tasks {args.tasks}; {args.learner}, {args.trials} trials x {args.steps} steps, "
        f"seed {args.seed}; load before: {os.getloadavg()}",
        flush=True,
    )
    rows = []
    for scheduler in args.schedulers.split(","):
        rows.append(run_one(scheduler, args, manifest))
        print(json.dumps(rows[-1]), f"load {os.getloadavg()}", flush=True)
    base = next((r for r in rows if r["scheduler"] == "fifo"), rows[0])
    print(
        "\n| scheduler | E (dev-test) | cFLOP | FLOPs saved vs FIFO | trials stopped | tasks choosing FIFO's trial | wall |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        saved = 1 - r["cflop"] / base["cflop"]
        same = sum(a == b for a, b in zip(r["chosen"], base["chosen"], strict=True))
        print(
            f"| {r['scheduler']} | {r['E']:.4f} | {r['cflop']:.3e} | {100 * saved:+.1f} % | "
            f"{r['stopped']}/{r['trials']} | {same}/{r['tasks']} | {r['wall_s']:.0f} s |"
        )
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
