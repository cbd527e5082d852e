"""Plotly figures of the dashboard, built server-side as JSON and drawn by the plotly.js that
the installed plotly package ships (no CDN: the pages work offline)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from services.store.runs.board_front import FrontPoint

_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
    "height": 380,
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "rgba(0,0,0,0)",
    "legend": {"orientation": "h", "y": -0.2},
}


def _json(figure: go.Figure) -> dict[str, Any]:
    figure.update_layout(**_LAYOUT)
    return figure.to_plotly_json()


def pareto(points: Sequence[FrontPoint], *, title: str) -> dict[str, Any]:
    """E against cFLOP (log axis), baselines apart, the front drawn; each point links to its
    submission (``customdata``)."""
    figure = go.Figure()
    for baseline, name, symbol in ((True, "baselines", "diamond"), (False, "submissions", "circle")):
        group = [p for p in points if p.baseline is baseline]
        if group:
            figure.add_trace(
                go.Scatter(
                    x=[p.cflop for p in group],
                    y=[p.mean_error for p in group],
                    mode="markers",
                    name=name,
                    marker={"symbol": symbol, "size": 9},
                    customdata=[p.submission_id for p in group],
                    text=[f"#{p.submission_id} {p.learner}" for p in group],
                    hovertemplate="%{text}<br>cFLOP %{x:.3s}<br>E %{y:.4f}<extra></extra>",
                )
            )
    front = sorted((p for p in points if p.on_front), key=lambda p: p.cflop)
    if front:
        figure.add_trace(
            go.Scatter(
                x=[p.cflop for p in front],
                y=[p.mean_error for p in front],
                mode="lines+markers",
                name="Pareto front",
                line={"shape": "hv", "dash": "dot"},
                marker={"size": 4},
                hoverinfo="skip",
            )
        )
    figure.update_layout(
        title=title, xaxis={"type": "log", "title": "cFLOP (log scale)"}, yaxis={"title": "E (mean error, meta-test)"}
    )
    return _json(figure)


def profiles(
    taus: Sequence[float], curves: Sequence[tuple[str, Sequence[float]]], *, title: str, axis: str
) -> dict[str, Any]:
    """Performance profiles: for each labelled submission, the fraction of tasks within a
    factor tau of the best, as a step curve over tau."""
    figure = go.Figure()
    for label, curve in curves:
        figure.add_trace(
            go.Scatter(
                x=list(taus),
                y=list(curve),
                mode="lines",
                name=label,
                line={"shape": "hv"},
                hovertemplate=f"{label}<br>tau %{{x:.2f}}<br>%{{y:.0%}} of tasks<extra></extra>",
            )
        )
    figure.update_layout(title=title, xaxis={"title": axis}, yaxis={"title": "fraction of tasks", "range": [0, 1.02]})
    return _json(figure)


def task_errors(
    orders: Sequence[int], errors: Sequence[float | None], flops: Sequence[float], *, labels: Sequence[str]
) -> dict[str, Any]:
    """Per-task error (bars) and cumulative cFLOP (line, right axis)."""
    cumulative, total = [], 0.0
    for value in flops:
        total += value
        cumulative.append(total)
    figure = go.Figure()
    figure.add_trace(
        go.Bar(
            x=list(orders),
            y=[e if e is not None else None for e in errors],
            name="task error",
            text=list(labels),
            hovertemplate="task %{x} %{text}<br>error %{y:.4f}<extra></extra>",
        )
    )
    figure.add_trace(
        go.Scatter(x=list(orders), y=cumulative, name="cumulative cFLOP", yaxis="y2", mode="lines+markers")
    )
    figure.update_layout(
        title="Error per task and cumulative compute",
        xaxis={"title": "task (stream order)"},
        yaxis={"title": "error", "rangemode": "tozero"},
        yaxis2={"title": "cFLOP", "overlaying": "y", "side": "right", "type": "log"},
    )
    return _json(figure)


def regret(orders: Sequence[int], curve: Sequence[float | None], *, reference: int) -> dict[str, Any]:
    figure = go.Figure(
        go.Scatter(x=list(orders), y=list(curve), mode="lines+markers", name="regret", connectgaps=False)
    )
    figure.add_hline(y=0, line={"dash": "dot"})
    figure.update_layout(
        title=f"Regret against Indep (submission #{reference})",
        xaxis={"title": "task"},
        yaxis={"title": "Σ (e − e Indep)"},
    )
    return _json(figure)


def slices(groups: dict[str, float], *, title: str, axis: str) -> dict[str, Any]:
    figure = go.Figure(go.Bar(x=list(groups), y=list(groups.values()), name="E"))
    figure.update_layout(title=title, xaxis={"title": axis, "type": "category"}, yaxis={"title": "E"})
    return _json(figure)


def compare(series: dict[str, tuple[Sequence[int], Sequence[float | None]]]) -> dict[str, Any]:
    figure = go.Figure()
    for name, (orders, errors) in series.items():
        figure.add_trace(go.Scatter(x=list(orders), y=list(errors), mode="lines+markers", name=name))
    figure.update_layout(title="Error per task", xaxis={"title": "task"}, yaxis={"title": "error"})
    return _json(figure)


def probe_curves(
    curves: Sequence[tuple[str, Sequence[int], Sequence[float | None]]], *, title: str, y_title: str
) -> dict[str, Any]:
    figure = go.Figure()
    for name, steps, values in curves:
        figure.add_trace(go.Scatter(x=list(steps), y=[_finite(v) for v in values], mode="lines+markers", name=name))
    figure.update_layout(title=title, xaxis={"title": "checkpoint step"}, yaxis={"title": y_title})
    return _json(figure)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


__all__ = ["compare", "pareto", "probe_curves", "profiles", "regret", "slices", "task_errors"]
