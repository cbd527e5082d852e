"""The probe report as the CLI prints it (``nevis probe run``, ``nevis results ID --probes``): each
task's committed trial's checkpoints (LiDAR, RankMe, linear accuracy), its mismatch scores, the
LiDAR δ sweep, the proxy correlations by scope and what probing cost (analysis FLOPs, never in
cFLOP); or the report as JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from services.core.config import get_settings

console = Console()
SCOPE_LABELS = {
    "trials": "across trials (final checkpoints)",
    "trials_mean": "across trials, task mean",
    "task": "within trajectories (checkpoints)",
    "task_mean": "within trajectories, task mean",
    "pooled": "pooled (tasks mixed)",
}


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def _flops(value: float | None) -> str:
    return "–" if value is None else f"{value:.3e}"


def load_report(run_id: int, *, settings_hash: str | None = None, task_order: int | None = None) -> Any:
    from services.store.db import ensure_current, sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.probes.report import load_probe_report  # noqa: PLC0415 - imported when the command runs (fast start)

    url = get_settings().database_url
    ensure_current(url)
    with sessions_on(url)() as session:
        return load_probe_report(session, submission_id=run_id, settings_hash=settings_hash, task_order=task_order)


def results_json(run_id: int) -> str:
    """``nevis results ID --json --probes``: the run summary and the probe report, one document."""
    from services.store.db import sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.summary import load_summary  # noqa: PLC0415 - imported when the command runs (fast start)

    report = load_report(run_id)
    with sessions_on(get_settings().database_url)() as session:
        summary = load_summary(session, submission_id=run_id)
    return json.dumps({**summary.to_dict(), "probes": report.to_dict()}, indent=2)


def show_probe_report(
    run_id: int, *, settings_hash: str | None = None, task_order: int | None = None, as_json: bool = False
) -> None:
    """Print the probe tables of a run (best trial of each task) and the correlations."""
    report = load_report(run_id, settings_hash=settings_hash, task_order=task_order)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    if report.settings_hash is None or not report.jobs:
        console.print(
            f"Run {run_id} has no probe results yet: probes need committed tasks with "
            f"checkpoints; then run `nevis probe run --submission {run_id}`."
        )
        return
    s = report.settings or {}
    console.print(
        f"Probes of run {run_id} (settings {report.settings_hash}: {s.get('folds')} folds, "
        f"{', '.join(s.get('kinds', []))}; targets {s.get('targets')}; LiDAR n≤{s.get('lidar_n')}, "
        f"q={s.get('lidar_q')}, δ={s.get('lidar_delta')} {s.get('lidar_delta_mode', 'absolute')})",
        highlight=False,
    )
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(report.jobs.items()))
    console.print(f"jobs: {jobs or 'none'}")
    ranks = Table(
        "task",
        "trial",
        "step",
        "LiDAR",
        "RankMe",
        "pretext err",
        "linear acc",
        "analysis FLOPs",
        title="Checkpoints of each task's committed trial",
        box=box.SIMPLE_HEAD,
    )
    for c in report.checkpoints:
        if c.best_trial:
            ranks.add_row(
                str(c.task_order),
                str(c.trial_index),
                str(c.step),
                _num(c.lidar, 2),
                _num(c.rankme, 2),
                _num(c.pretext_error),
                _num(c.linear_accuracy),
                _flops(c.analysis_flops),
            )
    console.print(ranks)
    mism = Table(
        "task",
        "target",
        "probe",
        "c",
        "MM3",
        "MSM3",
        "cSM3",
        "mSM3",
        "MOFM",
        "cOFM",
        "mOFM",
        title="Mismatch (METRICS.md §2) of each task's committed trial",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for m in report.mismatch:
        if m.best_trial:
            sc = m.scores
            fresh = "†" if (m.curves or {}).get("ofm_start") else ""
            mism.add_row(
                str(m.task_order),
                str(m.target_order),
                m.probe_kind + fresh,
                f"{m.conv_step}{'' if m.converged else '*'}",
                *(_num(sc[k], 1) for k in ("mm3", "msm3", "csm3", "msm3max", "mofm", "cofm", "mofm_max")),
            )
    console.print(mism)
    console.print(
        "  c: convergence step (* patience never ran out: the last checkpoint); "
        "values in percent, lower is better; MM3 on the task's own target only; † OFM from a "
        "fresh network of the architecture (the first checkpoint was transferred)",
        style="dim",
    )
    _show_lidar_sweep(report)
    corr = Table(
        "scope",
        "task",
        "proxy",
        "Spearman ρ",
        "Kendall τ-b",
        "points",
        title="LiDAR / RankMe vs linear-probe accuracy",
        box=box.SIMPLE_HEAD,
    )
    # Across trials first (the headline), within trajectories next, pooled (tasks mixed) last.
    for r in report.correlations:
        corr.add_row(
            SCOPE_LABELS.get(r.scope, r.scope),
            str(r.task_order) if r.task_order else "all",
            r.proxy,
            _num(r.spearman),
            _num(r.kendall_tau_b),
            str(r.num_points),
        )
    console.print(corr)
    console.print(
        "  across trials: the final checkpoint of every probed trial of a task (the LiDAR "
        "paper's ranking; needs --all-trials or --preset publish); within trajectories: "
        "checkpoints along training; pooled: all tasks mixed, not comparable across tasks",
        style="dim",
    )
    _show_across_trials(report.across_trials)
    _show_analysis_flops(report.analysis_flops)
    for key, error in report.failures:
        console.print(f"[yellow]failed[/] {key}: {error.splitlines()[0] if error else ''}", highlight=False)


def _show_lidar_sweep(report: Any) -> None:
    """LiDAR at each δ of the sweep for each task's last checkpoint of its committed trial:
    how much the figure owes to δ."""
    last: dict[int, Any] = {}
    for c in report.checkpoints:
        if c.best_trial and c.lidar_sweep and (c.task_order not in last or c.step > last[c.task_order].step):
            last[c.task_order] = c
    if not last:
        return
    deltas = sorted({d for c in last.values() for d in c.lidar_sweep}, key=float)
    mode = next(iter(last.values())).lidar_delta_mode or "absolute"
    table = Table(
        "task",
        "step",
        *(f"δ={d}" for d in deltas),
        box=box.SIMPLE_HEAD,
        title=f"LiDAR δ-sensitivity ({mode} δ; last checkpoint of the committed trial)",
    )
    for order, c in sorted(last.items()):
        table.add_row(str(order), str(c.step), *(_num(c.lidar_sweep.get(d), 2) for d in deltas))
    console.print(table)


def _show_across_trials(rows: Any) -> None:
    """Each task's across-trial ρ with what it takes to read it: n, the permutation p-value and
    the bootstrap interval (:mod:`services.core.rank_tests`)."""
    if not rows:
        return
    table = Table(
        "task",
        "proxy",
        "n",
        "Spearman ρ",
        "p (permutation)",
        "95 % interval",
        title="Across trials, per task: ρ against linear-probe accuracy with a null and an interval",
        box=box.SIMPLE_HEAD,
    )
    for r in rows:
        t = r.test
        interval = "–" if t.low is None else f"[{t.low:+.2f}, {t.high:+.2f}]"
        p = "–" if t.p_value is None else f"{t.p_value:.3f}" + ("" if t.exact else f" (B={t.permutations})")
        table.add_row(str(r.task_order), r.proxy, str(t.n), _num(t.rho, 2), p, interval)
    console.print(table)
    console.print(
        "  n: trials (final checkpoints) with both numbers; p: two-sided, every ordering of the "
        "trials when n ≤ 8 (with n = 4 no ρ can reach p < 0.083); interval: percentile bootstrap "
        "over trials, none below 4 trials",
        style="dim",
    )


def _show_analysis_flops(flops: Any) -> None:
    """What probing cost, per task and in total: the harness's analysis, never in cFLOP."""
    table = Table(
        "task",
        "learner passes",
        "probe fits",
        "analysis FLOPs",
        title="Analysis FLOPs (not in cFLOP)",
        box=box.SIMPLE_HEAD,
    )
    for t in flops.by_task:
        table.add_row(str(t.task_order), _flops(t.learner_passes), _flops(t.probe_fits), _flops(t.total))
    table.add_row("total", _flops(flops.learner_passes), _flops(flops.probe_fits), _flops(flops.total), style="bold")
    console.print(table)
    note = (
        "  what probing cost, over every probed trial: the checkpoint jobs' learner passes and "
        "the trial jobs' probe fits; never part of the run's cFLOP"
    )
    if flops.unmetered_jobs:
        note += f"; {flops.unmetered_jobs} job(s) done before analysis FLOPs were counted have none"
    console.print(note, style="dim")


__all__ = ["SCOPE_LABELS", "load_report", "results_json", "show_probe_report"]
