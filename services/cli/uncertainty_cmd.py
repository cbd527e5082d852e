"""``nevis compare A B`` and the interval ``nevis results`` prints beside E.

Both read stored runs (NEVIS_DATABASE_URL, NEVIS_STORE_URL) and their stored test predictions
(:mod:`services.store.runs.uncertainty`); ``nevis compare --remote`` asks the logged-in service
(``GET /v1/compare``) instead. Where an interval cannot be computed, the reason is printed
instead of a number.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings

console = make_console()


def load_interval(summary):
    """The run's E interval from the local database and object store."""
    from services.store.db import make_engine, session_factory  # noqa: PLC0415
    from services.store.objects import open_store  # noqa: PLC0415
    from services.store.runs.uncertainty import run_interval  # noqa: PLC0415

    settings = get_settings()
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    with session_factory(make_engine(settings.database_url))() as session:
        return run_interval(session, store, summary=summary)


def interval_text(interval) -> str:
    """What follows "E = 0.1234": "± 0.0123 [0.1111, 0.1357] 95 %", or why there is none."""
    if interval.result is None:
        return f"  (no 95 % interval: {interval.reason})" if interval.estimate is not None else ""
    low, high = interval.result.interval.low, interval.result.interval.high
    half = (high - low) / 2
    return (f" ± {half:.4f} [{low:.4f}, {high:.4f}] {_percent(interval.result.interval.level)} "
            f"(bootstrap over tasks and test examples, {interval.result.resamples} resamples)")


def interval_doc_text(doc: dict[str, Any] | None) -> str:
    """:func:`interval_text` of the API's ``error_interval`` object (``nevis status``)."""
    if not doc:
        return ""
    if doc["low"] is None:
        return f"  (no 95 % interval: {doc['unavailable']})" if doc.get("unavailable") else ""
    return f" ± {(doc['high'] - doc['low']) / 2:.4f} [{doc['low']:.4f}, {doc['high']:.4f}] {_percent(doc['level'])}"


def compare(
    a: int = typer.Argument(..., help="First run id (ΔE = E(A) − E(B))."),
    b: int = typer.Argument(..., help="Second run id, on the same stream version and phase."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (the shape of GET /v1/compare)."),
    remote: bool = typer.Option(False, "--remote", help="Ask the service `nevis login` set up instead of the local database."),
) -> None:
    """Compare two runs: per-task differences, the paired 95 % interval of ΔE, and Δ cFLOP."""
    doc = _remote(a, b) if remote else _local(a, b)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    show_comparison(doc)


def _local(a: int, b: int) -> dict[str, Any]:
    from services.store.db import ensure_current, make_engine, session_factory  # noqa: PLC0415
    from services.store.objects import open_store  # noqa: PLC0415
    from services.store.runs.uncertainty import compare as compare_runs  # noqa: PLC0415

    settings = get_settings()
    ensure_current(settings.database_url)
    store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    with session_factory(make_engine(settings.database_url))() as session:
        return compare_runs(session, store, a=a, b=b).to_dict()


def _remote(a: int, b: int) -> dict[str, Any]:
    from services.cli.client.api import NevisClient  # noqa: PLC0415

    with NevisClient.from_login() as client:
        return client.compare(a, b)


def show_comparison(doc: dict[str, Any]) -> None:
    """Print a comparison document (``Comparison.to_dict`` / ``GET /v1/compare``)."""
    a, b = doc["a"], doc["b"]
    table = Table("task", "dataset", f"error #{a}", f"error #{b}", "Δ", "95 % interval of Δ", "beyond noise",
                  "Δ FLOPs", title=f"Run {a} − run {b} on {doc['stream']} {doc['stream_version']} ({doc['phase']})")
    for t in doc["tasks"]:
        interval = "" if t["low"] is None else f"[{t['low']:+.4f}, {t['high']:+.4f}]"
        flag = "" if t["differs"] is None else ("yes" if t["differs"] else "no")
        table.add_row(str(t["order"]), t["dataset"], f"{t['error_a']:.4f}", f"{t['error_b']:.4f}",
                      f"{t['delta']:+.4f}", interval, flag, f"{t['delta_flops']:+.3e}")
    console.print(table)
    de, iv = doc["delta_error"], doc["delta_error_interval"]
    if de is None:
        console.print(f"ΔE = n/a ({iv['unavailable']})")
    elif iv["low"] is None:
        console.print(f"ΔE = E({a}) − E({b}) = {de:+.4f} over {iv['tasks']} tasks  (no 95 % interval: {iv['unavailable']})")
    else:
        verdict = "beyond noise" if iv["low"] > 0 or iv["high"] < 0 else "within noise (the interval holds 0)"
        console.print(f"ΔE = E({a}) − E({b}) = {de:+.4f} ± {(iv['high'] - iv['low']) / 2:.4f} "
                      f"[{iv['low']:+.4f}, {iv['high']:+.4f}] {_percent(iv['level'])} over {iv['tasks']} tasks: {verdict}")
        differing = doc["differing_tasks"]
        console.print(f"tasks that differ beyond noise: {', '.join(map(str, differing)) if differing else 'none'}")
    console.print(f"Δ cFLOP = {doc['delta_cflop']:+.4e}  ({doc['cflop_a']:.4e} − {doc['cflop_b']:.4e}; "
                  "counted, not sampled: no sampling noise)")


def _percent(level: float) -> str:
    return f"{level * 100:g} %"


__all__ = ["compare", "interval_doc_text", "interval_text", "load_interval", "show_comparison"]
