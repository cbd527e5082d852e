"""The Pareto study's three figures (plotly), built from its results alone.

Why separate from :mod:`services.dashboard.figures`: those return the dashboard's page JSON
for one leaderboard or one submission; a study compares learners × budgets × seeds, so its
figures need a colour per learner, error bars from seeds and side-by-side panels. They keep
the dashboard's conventions: cFLOP on a log axis, the front drawn as a dotted staircase,
regret as Σ (e − e Indep) with a zero line.

- :func:`pareto_figure`: E against cFLOP, one colour per learner, one marker per budget
  (mean over seeds, error bar = the Student t 95 % interval of that mean over the seeds; none
  with a single seed), each learner's front drawn; the figure says so under its title.
- :func:`regret_figure`: regret against Indep (METRICS.md §1) over the meta-test tasks and
  over the whole stream. Which runs give it: a ``meta_test`` run covers the whole stream
  (meta-train tasks scored on their test split too; ``StreamManifest.tasks_of_phase``), so
  both curves come from the point's own run, against the Indep point of the same budget
  and seed; the meta-test curve sums from the first meta-test task. A ``meta_train`` run
  holds the meta-train tasks only (dev-test split): its "whole stream" curve is over those,
  and it has no meta-test curve. Curves are averaged over seeds task by task.
- :func:`slices_figure`: E by domain and by training-set size bin (:data:`SIZE_BINS`), over
  the phase's headline tasks, mean over seeds with their standard deviation (said in the title).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from services.core.metrics import mean_error, regret_curve
from services.dashboard.static_png import write_html, write_png
from services.dashboard.study_report import AggregateRow, PointResult, TaskPoint

INDEP = "indep"
"""The reference learner of the regret curves (the built-in independent baseline)."""

SIZE_BINS: tuple[tuple[float, str], ...] = (
    (1_000, "< 1k"),
    (10_000, "1k – 10k"),
    (100_000, "10k – 100k"),
    (math.inf, "≥ 100k"),
)
"""Training-set size bins (upper bound, exclusive; label). The NEVIS'22 paper's own bin
edges were not found in this repository or in ``shared/``, so these are fixed decade edges,
not quartiles of the stream: the same four bins as the submission page's "E by
training-set size" (``services/dashboard/views.py``), so the two views agree."""

LEARNER_COLOURS = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#9d755d",
    "#ff9da6",
    "#bab0ac",
    "#eeca3b",
)
BUDGET_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_TEMPLATE = "plotly_white"


def colours(learners: Iterable[str]) -> dict[str, str]:
    """A colour per learner, in order of first appearance (cycling past ten)."""
    names = list(dict.fromkeys(learners))
    return {name: LEARNER_COLOURS[i % len(LEARNER_COLOURS)] for i, name in enumerate(names)}


def size_bin(size: int | None) -> str:
    """The :data:`SIZE_BINS` label of a training-set size; ``unknown`` when not known."""
    if size is None:
        return "unknown"
    return next(label for bound, label in SIZE_BINS if size < bound)


# --- (a) E against cFLOP ---------------------------------------------------------------------


def pareto_figure(rows: Sequence[AggregateRow], *, title: str, phase: str = "meta_test") -> go.Figure:
    """One marker trace per learner (budgets as text) with seed error bars, and a dotted
    staircase through that learner's front (rows marked ``on_front``)."""
    figure = go.Figure()
    palette = colours(r.learner for r in rows)
    for learner, colour in palette.items():
        mine = [r for r in rows if r.learner == learner]
        figure.add_trace(
            go.Scatter(
                x=[r.mean_cflop for r in mine],
                y=[r.mean_error for r in mine],
                mode="markers+text",
                name=learner,
                legendgroup=learner,
                text=[r.budget for r in mine],
                textposition="top center",
                marker={"color": colour, "size": 9},
                error_y={
                    "type": "data",
                    "array": [r.ci_half_width or 0.0 for r in mine],
                    "visible": any(r.ci_half_width is not None for r in mine),
                },
                customdata=[[r.seeds, _interval_text(r)] for r in mine],
                hovertemplate=(
                    f"{learner} %{{text}}<br>cFLOP %{{x:.3s}}<br>E %{{y:.4f}} (mean over %{{customdata[0]}} "
                    "seed(s))<br>%{customdata[1]}<extra></extra>"
                ),
            )
        )
        front = sorted((r for r in mine if r.on_front), key=lambda r: r.mean_cflop)
        figure.add_trace(
            go.Scatter(
                x=[r.mean_cflop for r in front],
                y=[r.mean_error for r in front],
                mode="lines",
                name=f"{learner} front",
                legendgroup=learner,
                showlegend=False,
                line={"color": colour, "dash": "dot", "shape": "hv"},
                hoverinfo="skip",
            )
        )
    seeds = max((r.seeds for r in rows), default=1)
    bars = (
        "error bars: Student t 95 % interval of the mean E over seeds"
        if seeds > 1
        else "one seed per point: no interval over seeds (run --seeds 0,1,2)"
    )
    figure.update_layout(
        title={"text": f"{title}<br><sup>{bars}</sup>"},
        template=_TEMPLATE,
        xaxis={"type": "log", "title": {"text": "cFLOP (log scale)"}},
        yaxis={"title": {"text": f"E (mean error, {phase.replace('_', '-')})"}},
    )
    return figure


def _interval_text(row: AggregateRow) -> str:
    if row.ci_low is None or row.ci_high is None:
        return "one seed: no interval"
    return f"95 % t interval over seeds [{row.ci_low:.4f}, {row.ci_high:.4f}], SD {row.std_error:.4f}"


# --- (b) regret against Indep ------------------------------------------------------------------


def _mean_curves(curves: Sequence[Sequence[float | None]]) -> list[float | None]:
    """Task-by-task mean of equally long curves; None where any seed's curve has a gap."""
    return [
        None if any(v is None for v in column) else statistics.fmean(column)  # type: ignore[arg-type]
        for column in zip(*curves, strict=True)
    ]


def regret_curves(
    points: Sequence[PointResult], *, meta_test_only: bool, reference: str = INDEP
) -> dict[tuple[str, str], tuple[list[TaskPoint], list[float | None]]]:
    """(learner, budget) → (tasks, regret against ``reference`` averaged over seeds), for
    every complete point whose reference point (same budget and seed) is complete too."""
    refs = {(p.budget, p.seed): p for p in points if p.learner == reference and p.complete}
    grouped: dict[tuple[str, str], list[list[float | None]]] = defaultdict(list)
    tasks: dict[tuple[str, str], list[TaskPoint]] = {}
    for point in points:
        ref = refs.get((point.budget, point.seed))
        if point.learner == reference or not point.complete or ref is None:
            continue
        mine = [t for t in point.task_rows if not meta_test_only or t.phase == "meta_test"]
        if not mine:
            continue
        theirs = {t.order: t.error for t in ref.task_rows}
        grouped[(point.learner, point.budget)].append(
            regret_curve([t.error for t in mine], [theirs.get(t.order) for t in mine])
        )
        tasks[(point.learner, point.budget)] = mine
    return {key: (tasks[key], _mean_curves(curves)) for key, curves in grouped.items()}


def regret_figure(points: Sequence[PointResult], *, title: str, reference: str = INDEP) -> go.Figure:
    """Two panels: regret over the meta-test tasks, and over the whole stream (the run's tasks)."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=("meta-test tasks", "whole stream"))
    palette = colours(p.learner for p in points)
    budgets = list(dict.fromkeys(p.budget for p in points))
    for col, meta_test_only in ((1, True), (2, False)):
        curves = regret_curves(points, meta_test_only=meta_test_only, reference=reference)
        for (learner, budget), (tasks, curve) in curves.items():
            figure.add_trace(
                go.Scatter(
                    x=[t.order for t in tasks],
                    y=curve,
                    mode="lines+markers",
                    name=f"{learner} {budget}",
                    legendgroup=f"{learner} {budget}",
                    showlegend=col == 2,
                    text=[t.dataset for t in tasks],
                    line={"color": palette[learner], "dash": BUDGET_DASHES[budgets.index(budget) % len(BUDGET_DASHES)]},
                    hovertemplate=f"{learner} {budget}<br>task %{{x}} %{{text}}<br>regret %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        if not curves:
            figure.add_annotation(
                text=_why_no_curve(points, meta_test_only, reference),
                showarrow=False,
                xref=f"x{'' if col == 1 else col} domain",
                x=0.5,
                yref=f"y{'' if col == 1 else col} domain",
                y=0.5,
            )
        figure.add_hline(y=0, line={"dash": "dot", "color": "#888888"}, row=1, col=col)
        figure.update_xaxes(title_text="task (stream order)", row=1, col=col)
    figure.update_yaxes(title_text=f"Σ (e − e {reference})", row=1, col=1)
    figure.update_layout(title=title, template=_TEMPLATE)
    return figure


def _why_no_curve(points: Sequence[PointResult], meta_test_only: bool, reference: str) -> str:
    if not any(p.learner == reference and p.complete for p in points):
        return f"no complete {reference} run in this study: add {reference} to --learners"
    if meta_test_only and not any(t.phase == "meta_test" for p in points for t in p.task_rows):
        return "no meta-test tasks in these runs (a meta_train study)"
    return f"no learner besides {reference} to compare"


# --- (c) E by domain and by training-set size -----------------------------------------------------


def _slice_means(point: PointResult, key: Callable[[TaskPoint], str]) -> dict[str, float]:
    """Mean error of the point's headline tasks per slice."""
    groups: dict[str, list[float]] = defaultdict(list)
    for task in point.task_rows:
        if task.phase == point.phase and task.error is not None:
            groups[key(task)].append(task.error)
    return {name: float(mean_error(values)) for name, values in groups.items()}  # type: ignore[arg-type]


def slice_table(
    points: Sequence[PointResult], key: Callable[[TaskPoint], str]
) -> dict[tuple[str, str], dict[str, tuple[float, float | None]]]:
    """(learner, budget) → slice → (mean over seeds of the slice's E, their sample std)."""
    per_seed: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for point in points:
        if point.complete:
            per_seed[(point.learner, point.budget)].append(_slice_means(point, key))
    table = {}
    for pair, seeds in per_seed.items():
        names = dict.fromkeys(name for seed in seeds for name in seed)
        values = {name: [seed[name] for seed in seeds if name in seed] for name in names}
        table[pair] = {
            name: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else None) for name, v in values.items()
        }
    return table


def _domain(task: TaskPoint) -> str:
    return task.domain or "unknown"


def _size(task: TaskPoint) -> str:
    return size_bin(task.train_size)


def slices_figure(points: Sequence[PointResult], *, title: str) -> go.Figure:
    """Grouped bars, one trace per (learner, budget): E by domain (left), by size bin (right)."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=("E by domain", "E by training-set size"))
    palette = colours(p.learner for p in points)
    budgets = list(dict.fromkeys(p.budget for p in points))
    order = [label for _, label in SIZE_BINS] + ["unknown"]
    for col, key in ((1, _domain), (2, _size)):
        table = slice_table(points, key)
        names = sorted(
            {n for slices in table.values() for n in slices}, key=(lambda n: order.index(n)) if key is _size else None
        )
        for (learner, budget), slices in table.items():
            shown = [n for n in names if n in slices]
            stds = [slices[n][1] for n in shown]
            figure.add_trace(
                go.Bar(
                    x=shown,
                    y=[slices[n][0] for n in shown],
                    name=f"{learner} {budget}",
                    legendgroup=f"{learner} {budget}",
                    showlegend=col == 1,
                    marker={"color": palette[learner], "opacity": _budget_opacity(budgets.index(budget), len(budgets))},
                    error_y={
                        "type": "data",
                        "array": [s or 0.0 for s in stds],
                        "visible": any(s is not None for s in stds),
                    },
                    hovertemplate=f"{learner} {budget}<br>%{{x}}<br>E %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        figure.update_xaxes(type="category", categoryorder="array", categoryarray=names, row=1, col=col)
    figure.update_xaxes(title_text="domain", row=1, col=1)
    figure.update_xaxes(title_text="train examples", row=1, col=2)
    figure.update_yaxes(title_text="E", rangemode="tozero", row=1, col=1)
    figure.update_layout(title=title, template=_TEMPLATE, barmode="group")
    return figure


def _budget_opacity(index: int, count: int) -> float:
    """Lighter bars for smaller budgets, full colour for the largest."""
    return 1.0 if count <= 1 else round(0.4 + 0.6 * index / (count - 1), 3)


# --- all three, as files ---------------------------------------------------------------------------


def indep_in(points: Sequence[PointResult]) -> str:
    """The study's Indep: ``indep`` when it ran, else its first variant (``indep_small``, ...)."""
    names = sorted({p.learner for p in points})
    return INDEP if INDEP in names else next((n for n in names if n.startswith(INDEP)), INDEP)


def study_figures(
    points: Sequence[PointResult], rows: Sequence[AggregateRow], *, stream: str, phase: str
) -> dict[str, go.Figure]:
    """The three figures of a study, by file stem."""
    where = f"{stream} ({phase.replace('_', '-')})"
    reference = indep_in(points)
    return {
        "pareto": pareto_figure(rows, title=f"E against cFLOP: {where}", phase=phase),
        "regret": regret_figure(
            points, reference=reference, title=f"Regret against {reference} (same budget and seed): {where}"
        ),
        "slices": slices_figure(
            points,
            title=f"E by domain and training-set size: {where}"
            "<br><sup>mean over seeds; error bars: their sample standard deviation</sup>",
        ),
    }


def write_figures(folder: Path, figures: dict[str, go.Figure]) -> list[Path]:
    """Each figure as self-contained HTML and as PNG in ``folder``; the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, figure in figures.items():
        written.append(write_html(figure, folder / f"{name}.html"))
        written.append(write_png(figure, folder / f"{name}.png"))
    return written


__all__ = [
    "BUDGET_DASHES",
    "INDEP",
    "indep_in",
    "LEARNER_COLOURS",
    "SIZE_BINS",
    "colours",
    "pareto_figure",
    "regret_curves",
    "regret_figure",
    "size_bin",
    "slice_table",
    "slices_figure",
    "study_figures",
    "write_figures",
]
