"""``nevis compare A B`` (or ``A1,A2 B1,B2`` for seeds) and the interval ``nevis results`` prints beside E.

Both read stored runs (NEVIS_DATABASE_URL, NEVIS_STORE_URL) and their stored test predictions
(:mod:`services.store.runs.uncertainty`); ``nevis compare --remote`` asks the logged-in service
(``GET /v1/compare``) instead. Where an interval cannot be computed, the reason is printed
instead of a number.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings

if TYPE_CHECKING:  # the store is imported when a command runs (startup time)
    from services.store.runs.summary import RunSummary
    from services.store.runs.uncertainty import RunInterval

console = make_console()


def load_interval(summary: RunSummary) -> RunInterval:
    """The run's E interval from the local database and object store."""
    from services.store.db import sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.objects import open_store  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.uncertainty import run_interval  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    with sessions_on(settings.database_url)() as session:
        return run_interval(session, store, summary=summary)


def interval_text(interval: RunInterval) -> str:
    """What follows "E = 0.1234": "± 0.0123 [0.1111, 0.1357] 95 %", or why there is none."""
    if interval.result is None:
        return f"  (no 95 % interval: {interval.reason})" if interval.estimate is not None else ""
    low, high = interval.result.interval.low, interval.result.interval.high
    half = (high - low) / 2
    general = interval.result.generalisation
    other = (
        f"; generalisation to other tasks (tasks resampled too): [{general.low:.4f}, {general.high:.4f}]"
        if general
        else ""
    )
    return (
        f" ± {half:.4f} [{low:.4f}, {high:.4f}] {_percent(interval.result.interval.level)} "
        f"(this benchmark: tasks kept, test examples resampled within each, {interval.result.resamples} "
        f"resamples{other})"
    )


def interval_doc_text(doc: dict[str, Any] | None) -> str:
    """:func:`interval_text` of the API's ``error_interval`` object (``nevis status``)."""
    if not doc:
        return ""
    if doc["low"] is None:
        return f"  (no 95 % interval: {doc['unavailable']})" if doc.get("unavailable") else ""
    return (
        f" ± {(doc['high'] - doc['low']) / 2:.4f} [{doc['low']:.4f}, {doc['high']:.4f}] {_percent(doc['level'])}"
        f" ({doc.get('question') or 'this benchmark'})"
    )


def compare(
    a: str = typer.Argument(..., help="First run id (ΔE = E(A) − E(B)), or comma-separated ids of its seeds."),
    b: str = typer.Argument(..., help="Second run id (or seeds' ids), on the same stream version and phase."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (the shape of GET /v1/compare)."),
    remote: bool = typer.Option(
        False, "--remote", help="Ask the service `nevis login` set up instead of the local database."
    ),
) -> None:
    """Compare two runs (paired), or two sets of seeds: per-task differences and Holm-controlled
    flags, ΔE with its 95 % interval on this benchmark (and P(A < B) with seeds), and Δ cFLOP."""
    ids_a, ids_b = run_ids(a, "A"), run_ids(b, "B")
    doc = _remote(ids_a, ids_b) if remote else _local(ids_a, ids_b)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    show_comparison(doc)


def run_ids(text: str, side: str) -> list[int]:
    """``"3"`` or ``"3,4,5"`` as run ids; a clear error naming the side otherwise."""
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise typer.BadParameter(
            f"Side {side} must be a run id or comma-separated run ids (3 or 3,4,5); got {text!r}."
        ) from None
    if any(i < 1 for i in ids):
        raise typer.BadParameter(f"Side {side}'s run ids must be positive; got {text!r}.")
    return ids


def _local(a: list[int], b: list[int]) -> dict[str, Any]:
    from services.store.db import ensure_current, sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.objects import open_store  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.comparison import compare as compare_runs  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    ensure_current(settings.database_url)
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    with sessions_on(settings.database_url)() as session:
        return compare_runs(session, store, a=a, b=b).to_dict()


def _remote(a: list[int], b: list[int]) -> dict[str, Any]:
    from services.cli.client.api import NevisClient  # noqa: PLC0415 - imported when the command runs (fast start)

    with NevisClient.from_login() as client:
        return client.compare(a, b)


def show_comparison(doc: dict[str, Any]) -> None:
    """Print a comparison document (``Comparison.to_dict`` / ``GET /v1/compare``)."""
    a, b = _side(doc, "a"), _side(doc, "b")
    table = Table(
        "task",
        "dataset",
        f"error {a}",
        f"error {b}",
        "Δ",
        "95 % interval of Δ",
        "beyond noise (Holm)",
        "Δ FLOPs",
        title=f"{a} − {b} on {doc['stream']} {doc['stream_version']} ({doc['phase']})",
    )
    for t in doc["tasks"]:
        interval = "" if t["low"] is None else f"[{t['low']:+.4f}, {t['high']:+.4f}]"
        flag = "" if t["differs"] is None else ("yes" if t["differs"] else "no")
        table.add_row(
            str(t["order"]),
            t["dataset"],
            f"{t['error_a']:.4f}",
            f"{t['error_b']:.4f}",
            f"{t['delta']:+.4f}",
            interval,
            flag,
            f"{t['delta_flops']:+.3e}",
        )
    console.print(table)
    de, iv = doc["delta_error"], doc["delta_error_interval"]
    if de is None:
        console.print(f"ΔE = n/a ({iv['unavailable']})")
    elif iv["low"] is None:
        console.print(
            f"ΔE = E({a}) − E({b}) = {de:+.4f} over {iv['tasks']} tasks  (no 95 % interval: {iv['unavailable']})"
        )
    else:
        verdict = "beyond noise" if iv["low"] > 0 or iv["high"] < 0 else "within noise (the interval holds 0)"
        console.print(
            f"ΔE = E({a}) − E({b}) = {de:+.4f} ± {(iv['high'] - iv['low']) / 2:.4f} "
            f"[{iv['low']:+.4f}, {iv['high']:+.4f}] {_percent(iv['level'])} over {iv['tasks']} tasks "
            f"({iv.get('question') or 'this benchmark'}; {iv['method']}): {verdict}"
        )
        general = iv.get("generalisation")
        if general and general.get("low") is not None:
            console.print(
                f"  generalisation to other tasks (tasks resampled too): [{general['low']:+.4f}, "
                f"{general['high']:+.4f}]"
            )
        poi = doc.get("probability_of_improvement") or {}
        if poi.get("estimate") is not None:
            console.print(
                f"P({a} < {b}) = {poi['estimate']:.3f} [{poi['low']:.3f}, {poi['high']:.3f}] "
                f"{_percent(poi['level'])} (probability of improvement)"
            )
        differing, flags = doc["differing_tasks"], doc.get("flags") or {}
        console.print(
            f"tasks that differ beyond noise: {', '.join(map(str, differing)) if differing else 'none'}"
            f" (noise covered: {flags.get('noise')}; {flags.get('correction', 'Holm')} over "
            f"{flags.get('family', len(doc['tasks']))} tasks at {flags.get('alpha', 0.05):g})"
        )
    console.print(
        f"Δ cFLOP = {doc['delta_cflop']:+.4e}  ({doc['cflop_a']:.4e} − {doc['cflop_b']:.4e}; "
        "counted, not sampled: no sampling noise)"
    )


def _side(doc: dict[str, Any], side: str) -> str:
    runs = doc.get(f"runs_{side}") or [doc[side]]
    return f"#{runs[0]}" if len(runs) == 1 else "seeds #" + ",".join(map(str, runs))


def _percent(level: float) -> str:
    return f"{level * 100:g} %"


__all__ = ["compare", "interval_doc_text", "interval_text", "load_interval", "run_ids", "show_comparison"]
