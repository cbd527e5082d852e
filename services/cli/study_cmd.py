"""``nevis study pareto``: the Pareto study (E against cFLOP over budgets) as one command.

Why one command: the study is a grid of ordinary runs (learner × TRIALSxSTEPS budget × seed,
each a submission in the database) that takes hours on a real stream, and must survive being
stopped. The command checks the whole grid before the first run, keeps its plan in
``OUT/study.json`` (rerunning resumes; see :mod:`workers.trainer.study`), shows progress
(points, tasks of the current point, trials of the current task), then writes the table
(``points.csv``, ``aggregate.csv``, ``results.json``, printed too) and the figures
(``pareto``, ``regret``, ``slices``, each as offline HTML and PNG) into ``OUT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from services.cli.console import make_console
from services.cli.run_cmd import TaskBars
from services.cli.study_proxies_cmd import proxies
from services.core.config import get_settings

if TYPE_CHECKING:  # the trainer is imported when a command runs (startup time)
    from services.store.runs.outcomes import TaskOutcome
    from workers.stream.manifest import TaskSpec
    from workers.trainer.study_plan import StudyPlan, StudyPoint

app = typer.Typer(no_args_is_help=True)
console = make_console()


@app.callback()
def study() -> None:
    """Studies made of many ordinary runs (a callback keeps ``pareto`` a subcommand)."""


class StudyBars(TaskBars):
    """Rich progress bars fed by the study's and the runner's observer calls: points done of
    the grid, tasks of the current point, trials of the current task."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(progress)
        self.points_bar: Any = None

    def _points(self, total: int) -> None:
        if self.points_bar is None:
            self.points_bar = self.progress.add_task("points", total=total)

    # StudyObserver
    def point_started(self, point: StudyPoint, position: int, total: int, *, resumed: bool) -> None:
        self._points(total)
        how = "resuming" if resumed else "starting"
        self.progress.console.print(f"point {position}/{total}: {point.label}: {how} run {point.submission_id}")
        if self.tasks_bar is None:
            self.tasks_bar = self.progress.add_task("tasks", total=None)
        self.progress.reset(self.tasks_bar, total=None, description=f"  tasks of {point.label}")

    def point_skipped(self, point: StudyPoint, position: int, total: int) -> None:
        self._points(total)
        self.progress.advance(self.points_bar)
        self.progress.console.print(
            f"point {position}/{total}: {point.label}: run {point.submission_id} finished earlier, skipped"
        )

    def point_finished(self, point: StudyPoint, position: int, total: int) -> None:
        self.progress.advance(self.points_bar)

    # RunObserver: TaskBars' bars, without its per-task lines (the study prints per point)
    def task_committed(self, task: TaskSpec, outcome: TaskOutcome) -> None:
        self.progress.advance(self.tasks_bar)


def pareto(
    stream: str = typer.Option(..., "--stream", "-s", help="Stream name or manifest path."),
    learners: str = typer.Option(
        ...,
        "--learners",
        help="Comma-separated learners, e.g. indep,ft_prev,ft_d (indep, or else its first variant such as indep_small, is the regret reference).",
    ),
    budgets: str = typer.Option(
        ..., "--budgets", help="Comma-separated per-task budgets TRIALSxSTEPS, e.g. 2x30,4x60,8x120."
    ),
    seeds: str = typer.Option(
        "0,1,2",
        "--seeds",
        help="Comma-separated run seeds (default three: E's mean, SD and 95 % t interval over them are reported and drawn).",
    ),
    phase: str = typer.Option(
        "meta_test",
        "--phase",
        help="meta_test (whole stream, test split) or meta_train (meta-train tasks, dev-test split).",
    ),
    out: Path = typer.Option(
        ..., "--out", help="Folder of the study: its plan (study.json), tables and figures. Rerun to resume."
    ),
) -> None:
    """Run learners × budgets × seeds as ordinary runs (resumable), then write the table and
    the E-against-cFLOP, regret and slice figures."""
    from services.store.db import upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.study import StudyRunner  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.study_plan import make_grid  # noqa: PLC0415 - imported when the command runs (fast start)

    grid = make_grid(stream=stream, phase=phase, learners=learners, budgets=budgets, seeds=seeds)
    settings = get_settings()
    ensure_sqlite_parent(settings.database_url)
    upgrade(settings.database_url)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        bars = StudyBars(progress)
        study = StudyRunner(StreamRunner(settings, observer=bars), out, observer=bars)
        plan = study.prepare(grid)
        progress.console.print(
            f"Study in {out}: {len(plan.points)} points ({len(plan.grid.learners)} learners × "
            f"{len(plan.grid.budgets)} budgets × {len(plan.grid.seeds)} seeds) on {plan.grid.stream}."
        )
        try:
            outcome = study.run(plan)
        except KeyboardInterrupt:
            progress.stop()
            console.print(
                "[yellow]Interrupted.[/] Finished points and committed tasks are kept; rerun the same "
                "command to resume."
            )
            raise typer.Exit(130) from None
    console.print(
        f"{len(outcome.created)} new, {len(outcome.resumed)} resumed, {len(outcome.skipped)} already finished."
    )
    write_report(out, outcome.plan)


def write_report(out: Path, plan: StudyPlan) -> None:
    """Read the study's runs back from the database; write and print its tables and figures."""
    from services.dashboard.study_figures import INDEP, study_figures, write_figures  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.dashboard.study_report import aggregate, load_results, write_tables  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)

    with sessions_on(get_settings().database_url)() as session:
        points = load_results(session, plan)
    rows = aggregate(points)
    written = write_tables(out, plan, points, rows)
    written += write_figures(out, study_figures(points, rows, stream=plan.grid.stream, phase=plan.grid.phase))
    _print_points(points)
    _print_aggregate(rows)
    if not any(name.startswith(INDEP) for name in plan.grid.learners):
        console.print(f"[yellow]note:[/] no {INDEP} in --learners, so regret.html has no curves.")
    console.print("Written: " + ", ".join(str(p) for p in written))


def _number(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _print_points(points: Sequence[Any]) -> None:
    table = Table("learner", "budget", "seed", "run", "status", "E", "cFLOP", "tasks", title="Study points")
    for p in points:
        table.add_row(
            p.learner,
            p.budget,
            str(p.seed),
            str(p.submission_id or ""),
            p.status,
            _number(p.mean_error, ".4f"),
            _number(p.cflop, ".3e"),
            f"{p.tasks}/{p.headline_tasks}",
        )
    console.print(table)


def _print_aggregate(rows: Sequence[Any]) -> None:
    table = Table(
        "learner",
        "budget",
        "seeds",
        "E mean",
        "E std",
        "E 95 % (t)",
        "cFLOP mean",
        "on front",
        title="Over seeds (mean, sample standard deviation, Student t 95 % interval of the mean)",
    )
    for r in rows:
        table.add_row(
            r.learner,
            r.budget,
            str(r.seeds),
            f"{r.mean_error:.4f}",
            _number(r.std_error, ".4f"),
            "" if r.ci_low is None else f"[{r.ci_low:.4f}, {r.ci_high:.4f}]",
            f"{r.mean_cflop:.3e}",
            "yes" if r.on_front else "",
        )
    console.print(table)


app.command("pareto", help="Learners × TRIALSxSTEPS budgets × seeds as runs (resumable); table and figures.")(pareto)
app.command(
    "proxies",
    help="Replay a probed run's trial choices under LiDAR / RankMe (choose, or prune at 1/8 and "
    "1/4): E, cFLOP, regret and FLOPs saved against dev selection.",
)(proxies)

__all__ = ["StudyBars", "app", "pareto", "study", "write_report"]
