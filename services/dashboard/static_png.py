"""PNG copies of plotly figures, drawn with matplotlib: no browser, no network.

Why not plotly's own ``write_image``: it needs ``kaleido``, which drives a Chromium of the
system's (not a Python dependency: none on a machine without Debian's ``chromium``), starts
a browser for every call (about 5 s here), and by default asks a CDN for MathJax. So the
study's PNGs are drawn from the *same* plotly figure by this small renderer, which
understands what those figures use, and nothing more:

- ``scatter`` traces (lines, markers, text labels, ``dash``, ``shape="hv"`` as steps, y error
  bars, ``None`` as a gap) and ``bar`` traces (grouped per category, y error bars, opacity);
- subplots laid out by their axis domains, log axes, axis and subplot titles, category order;
- horizontal lines (``add_hline``) and text annotations placed in an axis' domain.

Anything else in a figure is left out of the PNG (the HTML copy stays complete).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator, NullFormatter

PANEL_INCHES = (6.4, 4.4)
DPI = 120
_DASHES = {
    "solid": "-",
    "dash": "--",
    "dot": ":",
    "dashdot": "-.",
    "longdash": (0, (8, 3)),
    "longdashdot": (0, (8, 3, 1, 3)),
}


def _axis_key(ref: str, letter: str) -> str:
    """``x2`` → ``xaxis2``; ``x`` → ``xaxis``."""
    return f"{letter}axis{ref[1:]}"


def _ref(ref: str) -> str:
    """``x2 domain`` → ``x2``."""
    return ref.split()[0]


def _pairs(data: Sequence[dict[str, Any]], layout: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (x, y) axis pair the figure draws on, in order; (x, y) alone when none is named."""
    pairs = [(t.get("xaxis", "x"), t.get("yaxis", "y")) for t in data]
    for name in sorted(k for k in layout if k.startswith("xaxis")):
        anchor = layout[name].get("anchor")
        if anchor and anchor != "free":
            pairs.append(("x" + name[5:], anchor))
    return list(dict.fromkeys(pairs)) or [("x", "y")]


def _domain(layout: dict[str, Any], ref: str, letter: str) -> tuple[float, float]:
    lo, hi = layout.get(_axis_key(ref, letter), {}).get("domain", (0.0, 1.0))
    return float(lo), float(hi)


def _grid(layout: dict[str, Any], pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, int]]:
    """(row, column) of each axis pair, from where its domains start (top row first)."""
    columns = sorted({_domain(layout, x, "x")[0] for x, _ in pairs})
    rows = sorted({_domain(layout, y, "y")[0] for _, y in pairs}, reverse=True)
    return {
        (x, y): (rows.index(_domain(layout, y, "y")[0]), columns.index(_domain(layout, x, "x")[0])) for x, y in pairs
    }


def _numbers(values: Any) -> list[float]:
    return [math.nan if v is None else float(v) for v in (values or ())]


def _title(node: Any) -> str | None:
    """A title's text; plotly's line breaks as new lines, its inline tags (``<sup>``) dropped."""
    text = node.get("text") if isinstance(node, dict) else node
    if not isinstance(text, str):
        return None
    return re.sub(r"</?(sup|sub|b|i)>", "", text.replace("<br>", "\n"))


def _colour(trace: dict[str, Any]) -> str | None:
    colour = trace.get("marker", {}).get("color") or trace.get("line", {}).get("color")
    return colour if isinstance(colour, str) else None


def _errors(trace: dict[str, Any]) -> list[float] | None:
    error = trace.get("error_y") or {}
    return _numbers(error["array"]) if error.get("visible", True) and error.get("array") is not None else None


def _label(trace: dict[str, Any]) -> str:
    return trace.get("name", "") if trace.get("showlegend", True) is not False else "_nolegend_"


def _draw_scatter(ax: Axes, trace: dict[str, Any]) -> None:
    x, y = list(trace.get("x") or ()), _numbers(trace.get("y"))
    mode = trace.get("mode") or "lines+markers"
    colour, line = _colour(trace), trace.get("line", {})
    style = _DASHES.get(line.get("dash") or "solid", "-") if "lines" in mode else "none"
    ax.plot(
        x,
        y,
        linestyle=style,
        marker="o" if "markers" in mode else None,
        color=colour,
        markersize=5 if "markers" in mode else 0,
        label=_label(trace),
        drawstyle="steps-post" if line.get("shape") == "hv" else "default",
    )
    errors = _errors(trace)
    if errors is not None:
        ax.errorbar(x, y, yerr=errors, fmt="none", ecolor=colour, capsize=3, elinewidth=1)
    if "text" in mode and isinstance(trace.get("text"), list | tuple):
        for xi, yi, text in zip(x, y, trace["text"], strict=False):
            if not math.isnan(yi):
                ax.annotate(str(text), (xi, yi), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)


def _draw_bars(ax: Axes, traces: list[dict[str, Any]], categories: Sequence[str]) -> None:
    """Grouped bars: one slot per category, the traces side by side within it."""
    cats = list(dict.fromkeys([*categories, *(str(c) for t in traces for c in t.get("x") or ())]))
    width = 0.8 / len(traces)
    for i, trace in enumerate(traces):
        offset = (i - (len(traces) - 1) / 2) * width
        xs = [cats.index(str(c)) + offset for c in trace.get("x") or ()]
        ax.bar(
            xs,
            _numbers(trace.get("y")),
            width,
            yerr=_errors(trace),
            capsize=2,
            label=_label(trace),
            color=_colour(trace),
            alpha=float(trace.get("marker", {}).get("opacity", 1.0)),
        )
    ax.set_xticks(range(len(cats)), cats)


def _log_ticks(axis: Any, limits: tuple[float, float]) -> None:
    """SI labels (as plotly's ``.3s``); minor ticks labelled only when the axis spans less
    than a decade (else it has majors, and minor labels would overlap)."""
    axis.set_major_formatter(EngFormatter(sep=""))
    low, high = sorted(limits)
    narrow = low > 0 and high / low < 10
    axis.set_minor_formatter(EngFormatter(sep="") if narrow else NullFormatter())


def _style_axes(ax: Axes, layout: dict[str, Any], x: str, y: str) -> None:
    xaxis, yaxis = layout.get(_axis_key(x, "x"), {}), layout.get(_axis_key(y, "y"), {})
    if xaxis.get("type") == "log":
        ax.set_xscale("log")
        _log_ticks(ax.xaxis, ax.get_xlim())
    if yaxis.get("type") == "log":
        ax.set_yscale("log")
        _log_ticks(ax.yaxis, ax.get_ylim())
    ax.set_xlabel(_title(xaxis.get("title")) or "")
    ax.set_ylabel(_title(yaxis.get("title")) or "")
    if yaxis.get("rangemode") == "tozero":
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def _place_annotations(layout: dict[str, Any], axes: dict[tuple[str, str], Axes]) -> None:
    """Subplot titles (paper coordinates over a panel) and notes in a panel's domain."""
    for note in layout.get("annotations", ()):
        text = note.get("text", "")
        xref = note.get("xref", "paper")
        if xref.endswith("domain"):
            ax = next((a for (x, _), a in axes.items() if x == _ref(xref)), None)
            if ax is not None:
                ax.text(
                    note.get("x", 0.5),
                    note.get("y", 0.5),
                    text,
                    transform=ax.transAxes,
                    ha="center",
                    va="center",
                    wrap=True,
                    fontsize=9,
                    color="#555555",
                )
            continue
        for (x, y), ax in axes.items():  # make_subplots' titles sit centred above their panel
            lo, hi = _domain(layout, x, "x")
            top = _domain(layout, y, "y")[1]
            if abs((lo + hi) / 2 - float(note.get("x", -1))) < 1e-3 and abs(top - float(note.get("y", -1))) < 1e-3:
                ax.set_title(text)


def _draw_lines(layout: dict[str, Any], axes: dict[tuple[str, str], Axes]) -> None:
    """Horizontal lines spanning a panel (``add_hline``)."""
    for shape in layout.get("shapes", ()):
        if shape.get("type") == "line" and shape.get("y0") == shape.get("y1"):
            ax = next((a for (_, y), a in axes.items() if y == _ref(shape.get("yref", "y"))), None)
            if ax is not None:
                line = shape.get("line", {})
                ax.axhline(
                    float(shape["y0"]),
                    color=line.get("color", "#888888"),
                    linestyle=_DASHES.get(line.get("dash") or "solid", "-"),
                    linewidth=1,
                )


def to_matplotlib(figure: go.Figure) -> Figure:
    """The matplotlib copy of ``figure`` (see the module docstring for what is drawn)."""
    doc = figure.to_plotly_json()
    data, layout = list(doc.get("data", ())), dict(doc.get("layout", {}))
    pairs = _pairs(data, layout)
    grid = _grid(layout, pairs)
    rows, cols = max(r for r, _ in grid.values()) + 1, max(c for _, c in grid.values()) + 1
    out = Figure(figsize=(PANEL_INCHES[0] * cols, PANEL_INCHES[1] * rows + 0.8), layout="constrained")
    panels = out.subplots(rows, cols, squeeze=False)
    axes = {pair: panels[r][c] for pair, (r, c) in grid.items()}
    bars: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    whole: dict[tuple[str, str], bool] = {}  # every x of the panel's lines is an integer (task orders)
    for trace in data:
        pair = (trace.get("xaxis", "x"), trace.get("yaxis", "y"))
        if trace.get("type") == "bar":
            bars[pair].append(trace)
        elif trace.get("type", "scatter") == "scatter":
            _draw_scatter(axes[pair], trace)
            whole[pair] = whole.get(pair, True) and all(isinstance(v, int) for v in trace.get("x") or ())
    for pair, integers in whole.items():
        if integers and layout.get(_axis_key(pair[0], "x"), {}).get("type") != "log":
            axes[pair].xaxis.set_major_locator(MaxNLocator(integer=True))
    for pair, group in bars.items():
        _draw_bars(axes[pair], group, layout.get(_axis_key(pair[0], "x"), {}).get("categoryarray") or ())
    for (x, y), ax in axes.items():
        _style_axes(ax, layout, x, y)
    _draw_lines(layout, axes)
    _place_annotations(layout, axes)
    if _title(layout.get("title")):
        out.suptitle(_title(layout.get("title")))
    _legend(out, list(axes.values()))
    return out


def _legend(out: Figure, axes: list[Axes]) -> None:
    """One legend for the whole figure, below it, each label once."""
    seen: dict[str, Any] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels, strict=True):
            seen.setdefault(label, handle)
    if seen:
        out.legend(
            list(seen.values()),
            list(seen),
            loc="outside lower center",
            ncols=min(len(seen), 4),
            fontsize=8,
            frameon=False,
        )


def write_png(figure: go.Figure, path: Path, *, dpi: int = DPI) -> Path:
    """Write ``figure`` as a PNG at ``path``; returns the path."""
    path = Path(path)
    to_matplotlib(figure).savefig(path, dpi=dpi, format="png")
    return path


def write_html(figure: go.Figure, path: Path) -> Path:
    """Write ``figure`` as one self-contained HTML file: plotly.js inlined, no CDN, no MathJax."""
    path = Path(path)
    figure.write_html(path, include_plotlyjs=True, include_mathjax=False, full_html=True)
    return path


__all__ = ["DPI", "PANEL_INCHES", "to_matplotlib", "write_html", "write_png"]
