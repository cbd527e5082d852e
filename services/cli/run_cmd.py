"""``nevis run`` and ``nevis results``: run a learner over a stream, and read a run back.

``run`` shows progress bars (tasks, and trials of the current task), then the per-task
table with E and cFLOP read back from the database, so the numbers printed are the stored
ones. ``--resume ID`` continues an interrupted run from its last committed task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from services.cli import verify_cmd
from services.cli.console import make_console
from services.cli.results_extras import gpu_energy_line, print_transfer
from services.core.budget import SCHEDULER_NAMES, SEARCH_NAMES
from services.core.config import get_settings
from services.store.runs.gpu_energy import energy_text, gpu_text

if TYPE_CHECKING:  # the store and the trainer are imported when a command runs (startup time)
    from services.store.runs.outcomes import TaskOutcome, TrialOutcome
    from services.store.runs.summary import RunSummary
    from services.store.runs.transfer import TransferReport
    from workers.stream.manifest import TaskSpec

console = make_console()


class TaskBars:
    """Rich progress bars fed by the runner's observer calls: tasks of the run, trials of the
    current task (``nevis study`` adds a bar of its own above them)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks_bar: Any = None
        self.trials_bar: Any = None

    def task_started(self, task: TaskSpec, position: int, total: int, trials: int) -> None:
        if self.tasks_bar is None:
            self.tasks_bar = self.progress.add_task("tasks", total=total, completed=position - 1)
        self.progress.update(self.tasks_bar, total=total, completed=position - 1)
        label = f"task {task.order} {task.dataset}"
        if self.trials_bar is None:
            self.trials_bar = self.progress.add_task(label, total=trials)
        self.progress.reset(self.trials_bar, total=trials, description=f"  trials of {label}")

    def trial_finished(self, task: TaskSpec, outcome: TrialOutcome) -> None:
        self.progress.advance(self.trials_bar)
        if not outcome.ok:
            self.progress.console.print(
                f"[yellow]trial {outcome.trial_index} of task {task.order} failed:[/] {outcome.error}"
            )

    def task_committed(self, task: TaskSpec, outcome: TaskOutcome) -> None:
        self.progress.advance(self.tasks_bar)
        self.progress.console.print(
            f"task {task.order:>3} {task.dataset:<28} error {outcome.error:.4f}  FLOPs {outcome.flops:.3e}"
            f"{' (floor)' if outcome.flops_floored else ' (own count)'}  CPU s {cpu_text(outcome.cpu_seconds)}"
            f"  FLOP/CPU s {rate_text(outcome.flops, outcome.cpu_seconds)}"
        )


def run(
    stream: str = typer.Option("mini", "--stream", "-s", help="Stream name or manifest path."),
    learner: str = typer.Option("indep", "--learner", "-l", help="Built-in name or module:factory."),
    trials: int = typer.Option(4, "--trials", help="Hyper-parameter trials per task."),
    steps: int = typer.Option(200, "--steps", help="Optimisation steps per trial."),
    phase: str = typer.Option(
        "meta_test",
        "--phase",
        help="meta_test (whole stream, test split) or meta_train (meta-train tasks, dev-test split).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the search and the trials."),
    search: str | None = typer.Option(
        None,
        "--search",
        callback=lambda v: v and _known("search strategy", v, SEARCH_NAMES),
        help="Search strategy: random, or gp_ucb (sequential Gaussian-process search). Default: the learner's preference (bhpo: gp_ucb), else random.",
    ),
    scheduler: str = typer.Option(
        "fifo",
        "--scheduler",
        callback=lambda v: _known("trial scheduler", v, SCHEDULER_NAMES),
        help="Trial scheduler: fifo, asha (stops trailing trials at intermediate reports), or proxy (the same on LiDAR, no labels).",
    ),
    max_concurrent: int | None = typer.Option(
        None, "--max-concurrent", help="Trials at once (default: as the CPUs allow)."
    ),
    image_size: int | None = typer.Option(
        None,
        "--image-size",
        help="Task resolution: side in pixels of the images learners see and are scored on (default: the stream's).",
    ),
    flop_cap: float | None = typer.Option(
        None,
        "--flop-cap",
        help="Stop the run (status stopped) once its committed tasks' cFLOP reaches this; that task is kept.",
    ),
    wall_cap: float | None = typer.Option(
        None,
        "--wall-cap",
        help="Stop the run (status stopped) once its committed tasks' wall time reaches this many seconds.",
    ),
    checkpoints: str = typer.Option(
        "0,0.125,0.25,0.5,0.75,1",
        "--checkpoints",
        help="Fractions of each trial's steps at which to save checkpoints (0 = untrained).",
    ),
    resume: int | None = typer.Option(None, "--resume", help="Continue run ID from its last committed task."),
    pretrained: str | None = typer.Option(
        None,
        "--pretrained",
        help="Checkpoint file (made by `nevis pretrain`) or object-store key that pt / pt_ft start from.",
    ),
    private: bool = typer.Option(
        False,
        "--private",
        help="Leave the run off the public leaderboard and pages (a local run has no owner: admins' tokens see it).",
    ),
    ruleset: str = typer.Option(
        "open",
        "--ruleset",
        callback=lambda v: known_ruleset(v, "--ruleset"),
        help="Rules to play by (docs/rules.md): open, budget-<X> (the harness stops trials at X cFLOP per task; budget-<X>-total-<Y> caps the run too) or self-tuning (one trial per task, the learner's defaults).",
    ),
) -> None:
    """Run a learner over a stream on Ray and store everything; prints E and cFLOP."""
    from services.core.budget import RunBudget  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.run_plan import RunRequest  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    budget = RunBudget(
        trials=trials,
        steps=steps,
        seed=seed,
        max_concurrent=max_concurrent,
        flop_cap=flop_cap,
        wall_cap_s=wall_cap,
        checkpoint_fractions=_fractions(checkpoints),
        scheduler=scheduler,
        **({"search": search} if search else {}),
    )
    ensure_sqlite_parent(settings.database_url)
    upgrade(settings.database_url)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        runner = StreamRunner(settings, observer=TaskBars(progress))
        if resume is not None:
            run_id = resume
            progress.console.print(f"Resuming run {run_id}.")
        else:
            run_id = runner.create(
                RunRequest(
                    stream=stream,
                    learner=learner,
                    phase=phase,
                    budget=budget,
                    image_size=image_size,
                    pretrained=pretrained,
                    ruleset=ruleset,
                    visibility="private" if private else "public",
                )
            )
            progress.console.print(f"Run {run_id}: {learner} on {stream} (resume with `nevis run --resume {run_id}`).")
        try:
            runner.run(run_id)
        except KeyboardInterrupt:
            progress.stop()
            console.print(
                f"[yellow]Interrupted.[/] Committed tasks are kept; continue with `nevis run --resume {run_id}`."
            )
            raise typer.Exit(130) from None
    show_results(run_id, as_json=False)


def _known(kind: str, name: str, known: tuple[str, ...]) -> str:
    """``name`` if it is one of ``known``; otherwise a usage error listing them."""
    from services.core.errors import unknown_name_message  # noqa: PLC0415 - imported when the command runs (fast start)

    if name not in known:
        raise typer.BadParameter(unknown_name_message(kind, name, known))
    return name


def known_ruleset(name: str, option: str) -> str:
    """``name`` if it is a ruleset (:mod:`services.core.rulesets`), else a usage error naming ``option``."""
    from services.core.errors import UnknownNameError  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.core.rulesets import ruleset  # noqa: PLC0415 - imported when the command runs (fast start)

    try:
        ruleset(name)
    except UnknownNameError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None
    return name


def _fractions(text: str) -> tuple[float, ...]:
    from services.core.errors import BudgetError  # noqa: PLC0415 - imported when the command runs (fast start)

    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise BudgetError(f"--checkpoints must be comma-separated numbers in [0, 1]; got {text!r}.") from None


def results(
    run_id: int = typer.Argument(..., help="Run (submission) id, as printed by `nevis run`."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    probes: bool = typer.Option(False, "--probes", help="Also print the probe results (nevis probe run)."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also write an HTML plot (per-task error, cumulative FLOPs) to this file."
    ),
) -> None:
    """Print a stored run: per-task errors and FLOPs, E and cFLOP."""
    from services.cli import probe_report_cmd  # noqa: PLC0415 - imported when the command runs (fast start)

    if plot is not None:
        _write_plot(run_id, plot, quiet=as_json)
    if probes and as_json:
        typer.echo(probe_report_cmd.results_json(run_id))
        return
    show_results(run_id, as_json=as_json)
    if probes:
        probe_report_cmd.show_probe_report(run_id)


def _load_summary(run_id: int) -> RunSummary:
    """The stored run, read from NEVIS_DATABASE_URL (which must be at the current schema)."""
    from services.store.db import ensure_current, sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.summary import load_summary  # noqa: PLC0415 - imported when the command runs (fast start)

    url = get_settings().database_url
    ensure_current(url)
    with sessions_on(url)() as session:
        return load_summary(session, submission_id=run_id)


def _load_transfer(run_id: int) -> TransferReport:
    """The run's transfer report (repeats, FT-d's choices, resolution slices) from the local
    database and object store."""
    from services.store.db import sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.objects import open_store  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.transfer import transfer_report  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    with sessions_on(settings.database_url)() as session:
        return transfer_report(session, store, submission_id=run_id)


def _write_plot(run_id: int, path: Path, *, quiet: bool) -> None:
    from workers.trainer.plots import write_run_plot  # noqa: PLC0415 - imported when the command runs (fast start)

    written = write_run_plot(_load_summary(run_id), path)
    if not quiet:
        console.print(f"Plot written to {written}")


def show_results(run_id: int, *, as_json: bool) -> RunSummary:
    from services.cli.uncertainty_cmd import interval_text, load_interval  # noqa: PLC0415 - imported when the command runs (fast start)

    summary = _load_summary(run_id)
    interval = load_interval(summary)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    **summary.to_dict(),
                    "error_interval": interval.to_dict(),
                    "transfer": _load_transfer(run_id).to_dict(),
                },
                indent=2,
            )
        )
        return summary
    split = any(row.flops_paper is not None for row in summary.tasks)  # FLOPs by purpose were stored
    purposes = ("updates", "validation", "prediction") if split else ()
    # per-task GPU-hours only where some task measured a GPU; else the summary line says why not
    gpu = ("GPU-h",) if any(row.gpu_seconds is not None for row in summary.tasks) else ()
    table = Table(
        "task",
        "year",
        "phase",
        "dataset",
        "status",
        Column("error", no_wrap=True),
        "split",
        Column("FLOPs (own count / floor)", no_wrap=True),  # its mark stays on its line
        *purposes,
        Column("CPU s", no_wrap=True),
        "FLOP/CPU s",
        *gpu,
        "energy",
        "retried FLOPs",
        "trials (failed)",
        title=f"Run {summary.submission_id}: {summary.learner} on {summary.stream} {summary.stream_version} "
        f"({summary.phase}, ruleset {summary.ruleset})",
    )
    for row in summary.tasks:
        table.add_row(
            str(row.order),
            str(row.year),
            row.phase,
            row.dataset,
            row.status,
            ("" if row.error is None else f"{row.error:.4f}") + (" INCONSISTENT" if row.inconsistent else ""),
            row.split or "",
            f"{row.flops:.3e}" + (" floor" if row.flops_floored else " near floor" if row.flops_near_floor else ""),
            *((_flops_text(v) for v in (row.flops_paper, row.flops_validation, row.flops_prediction)) if split else ()),
            cpu_text(row.cpu_seconds) + (" est." if row.cpu_estimated else "") if row.status == "committed" else "",
            rate_text(row.flops, row.cpu_seconds) if row.status == "committed" else "",
            *((gpu_text(row.gpu_seconds, row.gpu_note) if row.status == "committed" else "",) if gpu else ()),
            energy_text(row.energy_kwh, row.energy_source) if row.status == "committed" else "",
            f"{row.retried_flops:.3e}" if row.retried_flops else "",
            (f"{row.trials} ({row.failed_trials})" + (f", {row.capped_trials} at cap" if row.capped_trials else ""))
            if row.trials
            else "",
        )
    console.print(table)
    scored = sum(r.error is not None for r in summary.tasks if r.phase == summary.phase)
    e_text = "n/a" if summary.mean_error is None else f"{summary.mean_error:.4f}"
    console.print(f"E ({summary.phase}, {scored}/{summary.headline_tasks} tasks) = {e_text}{interval_text(interval)}")
    console.print(
        f"cFLOP = {summary.cflop:.4e}  (FLOPs {', '.join(summary.flops_sources) or 'measured'}; retried work {summary.retried_flops:.3e})"
        f"  cFLOP (paper) = {_flops_text(summary.cflop_paper, digits=4) or 'not split'}"
        f"  CPU s = {cpu_text(summary.cpu_seconds)}"
        f" ({'not measured' if summary.cpu_seconds is None else 'harness-measured'})"
    )
    console.print(gpu_energy_line(summary))
    if summary.cflop_pretraining is not None:
        console.print(
            f"cFLOP of pretraining = {summary.cflop_pretraining:.4e}  (the run that made its "
            "self-pretrained checkpoint; not in cFLOP)"
        )
    if summary.flops_floored:
        console.print(
            f"[yellow]floor:[/] {summary.floored_tasks} task(s) charged a FLOP floor: some trial's FLOP count "
            "was below what its measured CPU time implies."
        )
    if summary.inconsistent:
        console.print(
            f"[red]inconsistent:[/] on {summary.inconsistent_tasks} task(s) the learner answered test images "
            "right and the same images shifted by one pixel wrong, far more often than honest learners do "
            "(as a table of test labels would): E is not to be trusted (docs/isolation.md, 'Public data')."
        )
    print_transfer(console, _load_transfer(run_id))
    if mark := verify_cmd.stored_mark_line(run_id):  # replayed with new seeds: docs/rules.md
        console.print(mark)
    console.print(f"status: {summary.status}" + (f" ({summary.message})" if summary.message else ""))
    return summary


def _flops_text(value: float | None, *, digits: int = 3) -> str:
    """A FLOP figure as printed; a figure stored before FLOPs were split by purpose is blank."""
    return "" if value is None else f"{value:.{digits}e}"


def rate_text(flops: float, cpu_seconds: float | None) -> str:
    """The FLOPs charged per harness-measured CPU-second: what the learner's count implies
    about its speed, beside the node's calibrated rate (docs/isolation.md); "unknown" without
    a measurement."""
    return "unknown" if not cpu_seconds else f"{flops / cpu_seconds:.2e}"


def cpu_text(seconds: float | None) -> str:
    """Harness-measured CPU seconds as printed: not measured is "unknown", never 0, and a
    short measured time keeps two significant digits."""
    if seconds is None:
        return "unknown"
    return f"{seconds:,.1f}" if seconds >= 1 else f"{seconds:.2g}"


__all__ = ["TaskBars", "cpu_text", "known_ruleset", "rate_text", "results", "run", "show_results"]
