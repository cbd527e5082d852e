"""The figures of one ``bench/gpu_checks.sh`` run as Markdown, ready for the docs.

Reads every ``gpu_*.json`` (``bench_gpu.py`` runs), ``paper_scale*.json`` and ``floor_check.json``
(``bench/gpu_floor_check.py``) in a folder and prints one table of the runs (batch, processes
sharing the device, compile mode, images/s, TFLOP/s, fraction of the bf16 peak, ms per step, the
input's share, the meter's overhead), one of the FULL-stream estimates, one row per sharing and
GPU count, and the hostile learner's charge against its honest twin's, with which half of the
floor check ran. The device tool returns only the tail of a run's output, so ``gpu_checks.sh`` prints this last: what a session lent a GPU pastes
into docs/performance-input.md and docs/performance-scale.md.

Usage: ``python bench/gpu_report.py OUT_FOLDER``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_runs import hours


def _num(value: Any, spec: str, *, scale: float = 1.0, suffix: str = "") -> str:
    return "–" if value is None else f"{value * scale:{spec}}{suffix}"


def run_rows(runs: list[dict[str, Any]]) -> list[str]:
    """One Markdown row per bench_gpu.py run, by batch, then sharing, then compile mode."""
    rows = [
        "| batch | processes | compile | images/s | TFLOP/s | of bf16 peak | ms per step (each process) "
        "| input's share | meter overhead |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in sorted(runs, key=lambda r: (r["batch"], r.get("procs", 1), str(r.get("compile")))):
        rows.append(
            f"| {run['batch']} | {run.get('procs', 1)} | {run.get('compile') or 'no'} "
            f"| {run['images_per_s']:,.0f} | {run['tflops_per_s']:.3g} | {_num(run.get('mfu'), '.1%')} "
            f"| {_num(run['loop_s_per_step'], '.2f', scale=1e3)} | {_num(run.get('input_share_of_loop'), '.0%')} "
            f"| {_num(run.get('meter_overhead'), '+.1%')} |"
        )
    return rows


def scale_rows(scales: list[dict[str, Any]]) -> list[str]:
    """One Markdown row per (trials per GPU, GPU count) of the paper_scale.py estimates."""
    rows = [
        "| trials per GPU | GPUs | wall time | GPU-hours busy | GPU-hours held | bound |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for scale in sorted(scales, key=lambda s: s.get("trials_per_gpu", 1)):
        for row in scale["rows"]:
            rows.append(
                f"| {scale.get('trials_per_gpu', 1)} | {row['gpus']} | {hours(row['wall_h'])} | {row['gpu_hours_busy']:,.0f} "
                f"| {row['gpu_hours_held']:,.0f} | {row['bound']} |"
            )
    return rows


def floor_rows(check: dict[str, Any]) -> list[str]:
    """The honest and the hostile learner of gpu_floor_check.py, one Markdown row each, and its verdict."""
    rows = [
        f"gpu_floor_check.py on {check['device']}, {check['seconds']} s each: the hostile learner (meter patched, "
        f"raw matmuls) charged {_num(check.get('ratio_hostile_over_honest'), '.3f')} x its honest twin's charge",
        "",
        "| learner | steps | own FLOPs | CPU-s | GPU-s | floor | of it GPU term | charged | source |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in (check["honest"], check["hostile"]):
        rows.append(
            f"| {row['learner']} | {row['steps']} | {row['own_flops']:.3g} | {_num(row['cpu_seconds'], '.1f')} "
            f"| {_num(row['gpu_seconds'], '.1f')} | {row['floor']:.3g} | {row['floor_gpu_term']:.3g} "
            f"| {row['charged']:.3g} | {row['source']} |"
        )
    rows.append("")
    for name, half in (("CPU half", check["cpu_half"]), ("GPU half", check["gpu_half"])):
        said = ("caught" if half["caught"] else "NOT caught") if half["run"] else half["why"]
        rows.append(f"{name}: {said}{' (' + half['why'] + ')' if half['run'] and half.get('why') else ''}")
    return rows


def report(folder: Path) -> str:
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("gpu_*.json"))]
    scales = [json.loads(p.read_text()) for p in sorted(folder.glob("paper_scale*.json"))]
    floor = folder / "floor_check.json"
    checked = floor_rows(json.loads(floor.read_text())) if floor.is_file() else []
    if not runs:
        if checked:  # the floor check ran before the deadline cut the rest
            print("\n".join(checked))
        raise SystemExit(f"no bench_gpu.py runs (gpu_*.json) in {folder}")
    devices = sorted({str(run.get("device")) for run in runs})
    torches = sorted({str(run.get("torch")) for run in runs})
    lines = [
        f"bench_gpu.py on {', '.join(devices)} (torch {', '.join(torches)}), ResNet-34 (width "
        f"{runs[0].get('width')}) at 64 px, {runs[0].get('steps')} timed steps after {runs[0].get('warmup')}:",
        "",
        *run_rows(runs),
    ]
    if scales:
        first = scales[0]
        lines += [
            "",
            f"paper_scale.py: one {first['stream']} submission ({first['tasks']} tasks) at "
            f"{first['trials']} trials x {first['steps']:,} steps, at the rates measured above:",
            "",
            *scale_rows(scales),
        ]
    if checked:
        lines += ["", *checked]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    print(report(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
