"""A run as a picture: per-task error and cumulative FLOPs along the stream (plotly)."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from services.store.runs.summary import RunSummary

PHASE_COLOURS = {"meta_train": "#4c78a8", "meta_test": "#f58518"}


def run_figure(summary: RunSummary) -> go.Figure:
    """Two panels sharing the task axis: error per task (by phase), cumulative cFLOP."""
    rows = [r for r in summary.tasks if r.error is not None]
    labels = [f"{r.order}. {r.dataset}" for r in rows]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("task error (1 − accuracy, or 1 − mAP)", "cumulative FLOPs"),
    )
    for phase, colour in PHASE_COLOURS.items():
        picked = [(label, r) for label, r in zip(labels, rows) if r.phase == phase]
        fig.add_trace(
            go.Bar(
                x=[label for label, _ in picked],
                y=[r.error for _, r in picked],
                name=phase.replace("_", "-"),
                marker_color=colour,
                hovertext=[f"{r.year}, {r.split} split" for _, r in picked],
            ),
            row=1,
            col=1,
        )
    total, cumulative = 0.0, []
    for r in rows:
        total += r.flops
        cumulative.append(total)
    fig.add_trace(
        go.Scatter(x=labels, y=cumulative, mode="lines+markers", name="cFLOP", line={"color": "#54a24b"}), row=2, col=1
    )
    if summary.mean_error is not None:
        fig.add_hline(
            y=summary.mean_error, line_dash="dot", row=1, col=1, annotation_text=f"E = {summary.mean_error:.4f}"
        )
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_yaxes(type="log", title_text="FLOPs", row=2, col=1)
    fig.update_layout(
        title=(
            f"Run {summary.submission_id}: {summary.learner} on {summary.stream} "
            f"{summary.stream_version} ({summary.phase}) — cFLOP {summary.cflop:.3e}"
        ),
        barmode="group",
        height=700,
        template="plotly_white",
    )
    return fig


def write_run_plot(summary: RunSummary, path: Path) -> Path:
    """Write the figure as a standalone HTML file (plotly.js inlined: works offline)."""
    path = Path(path)
    run_figure(summary).write_html(path, include_plotlyjs=True, full_html=True)
    return path


__all__ = ["PHASE_COLOURS", "run_figure", "write_run_plot"]
