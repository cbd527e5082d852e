"""Plotly figures of a run's transfer (NEVIS'22 §5.2): repeats, FT-d's transfer matrix and E
by source resolution, built server-side as JSON like :mod:`services.dashboard.figures`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from services.core.transfer import Choice, Repeat, Slice, candidate_label

_LAYOUT = {
    "margin": {"l": 120, "r": 20, "t": 40, "b": 90},
    "height": 420,
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "rgba(0,0,0,0)",
    "legend": {"orientation": "h", "y": -0.3},
}


def _json(figure: go.Figure) -> dict[str, Any]:
    figure.update_layout(**_LAYOUT)
    return figure.to_plotly_json()


def repeats(rows: Sequence[Repeat], *, indep: int | None) -> dict[str, Any]:
    """Per repeated dataset: the first occurrence's error, the later one's, and Indep's on the
    later task (where an Indep run at this budget exists)."""
    labels = [f"{r.dataset} ({r.first}→{r.later})" for r in rows]
    figure = go.Figure()
    figure.add_trace(go.Bar(x=labels, y=[r.first_error for r in rows], name="first occurrence"))
    figure.add_trace(go.Bar(x=labels, y=[r.later_error for r in rows], name="later occurrence"))
    if indep is not None:
        figure.add_trace(go.Bar(x=labels, y=[r.indep_error for r in rows], name=f"Indep #{indep} on the later task"))
    figure.update_layout(
        title="Repeated datasets: error the first time and the next",
        barmode="group",
        xaxis={"title": "dataset (first task → later task)", "type": "category"},
        yaxis={"title": "error", "rangemode": "tozero"},
    )
    return _json(figure)


def transfer_matrix(
    targets: Sequence[int],
    sources: Sequence[int],
    cells: Sequence[Sequence[float | None]],
    choices: Mapping[int, Choice],
    datasets: Mapping[int, str],
) -> dict[str, Any]:
    """The k-NN error of every candidate start (columns) on each task (rows), lower is better,
    and the start the learner says it chose (a marker), as the paper draws FT-d's matrix."""
    x = [_label(s, datasets) for s in sources]
    y = [_label(t, datasets) for t in targets]
    figure = go.Figure(
        go.Heatmap(
            z=[list(row) for row in cells],
            x=x,
            y=y,
            colorscale="Viridis_r",
            zmin=0,
            zmax=1,
            name="k-NN error",
            colorbar={"title": "k-NN error"},
            hoverongaps=False,
            hovertemplate="task %{y}<br>start %{x}<br>k-NN error %{z:.4f}<extra></extra>",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=[_label(choices[t].chosen, datasets) for t in targets],
            y=y,
            mode="markers",
            name="chosen (the learner's record)",
            marker={"symbol": "x", "size": 12, "color": "crimson"},
            hovertemplate="task %{y} started from %{x}<extra></extra>",
        )
    )
    figure.update_layout(
        title="Transfer matrix: which start each task chose (FT-d's own record)",
        xaxis={"title": "candidate start", "type": "category"},
        yaxis={"title": "task", "type": "category", "autorange": "reversed"},
    )
    return _json(figure)


def resolution(slices: Sequence[Slice], *, indep: int | None) -> dict[str, Any]:
    """E per bucket of the source's image size (long side), the run's and Indep's."""
    figure = go.Figure(
        go.Bar(
            x=[s.bucket for s in slices],
            y=[s.mean_error for s in slices],
            name="E",
            text=[f"{s.tasks} task{'' if s.tasks == 1 else 's'}" for s in slices],
        )
    )
    if indep is not None:
        figure.add_trace(
            go.Bar(x=[s.bucket for s in slices], y=[s.indep_mean_error for s in slices], name=f"Indep #{indep}")
        )
    figure.update_layout(
        title="E by the source's image size",
        barmode="group",
        xaxis={"title": "long side of the source's images", "type": "category"},
        yaxis={"title": "E", "rangemode": "tozero"},
    )
    return _json(figure)


def _label(order: int, datasets: Mapping[int, str]) -> str:
    """ "3 coil20" for a task, else "fresh network" / "pretrained"."""
    name = datasets.get(order)
    return f"{order} {name.split(':', 1)[-1]}" if order >= 0 and name else candidate_label(order)


__all__ = ["repeats", "resolution", "transfer_matrix"]
