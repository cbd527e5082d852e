"""``nevis study proxies``: what label-free proxies would have chosen, replayed from stored rows.

Why: LiDAR and RankMe are probed for every checkpoint; if they rank trials as dev error does,
a search could choose trials, or stop them at their 1/8 and 1/4 checkpoints, without dev
labels and with fewer FLOPs. This replays each policy of :mod:`services.core.proxy_policies`
on a probed run (no learner code runs) and prints E, cFLOP, regret and FLOPs saved against
dev selection.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import NevisError

console = make_console()


def proxies(
    submission: int = typer.Option(
        ..., "--submission", help="The probed run (probe every trial: `nevis probe run --submission ID --all-trials`)."
    ),
    settings_hash: str | None = typer.Option(
        None, "--settings", help="Probe settings hash (default: the run's latest)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of the table."),
) -> None:
    """Replay each task's trial choice under LiDAR / RankMe (choose, or prune at the 1/8 and
    1/4 checkpoints) against dev selection: E (dev), cFLOP, regret, FLOPs saved."""
    from dataclasses import asdict  # noqa: PLC0415

    from services.core.proxy_policies import ReplayError, summarise  # noqa: PLC0415
    from services.store.db import make_engine, session_factory  # noqa: PLC0415
    from services.store.probes.proxy_replay import load_replay_input  # noqa: PLC0415

    engine = make_engine(get_settings().database_url)
    try:
        with session_factory(engine)() as session:
            replay = load_replay_input(session, submission_id=submission, settings_hash=settings_hash)
        rows, skipped = summarise(replay.tasks)
    except (NevisError, ReplayError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    replayed = [t.order for t in replay.tasks if not any(s.startswith(f"task {t.order}:") for s in skipped)]
    test_e = sum(replay.committed_error[o] for o in replayed) / len(replayed)
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "submission_id": submission,
                    "settings_hash": replay.settings_hash,
                    "tasks": replayed,
                    "committed_e_test": test_e,
                    "skipped": skipped,
                    "policies": [asdict(r) for r in rows],
                }
            )
        )
        return
    table = Table(
        "policy",
        "tasks",
        "E (dev)",
        "regret",
        "cFLOP",
        "FLOPs saved",
        "saved %",
        "proxy FLOPs",
        "same trial as dev",
        "trials stopped",
        title=f"Run {submission}: trial choice replayed under label-free proxies (settings {replay.settings_hash})",
    )
    for r in rows:
        table.add_row(
            r.policy,
            str(r.tasks),
            f"{r.e_dev:.4f}",
            f"{r.regret:+.4f}",
            f"{r.cflop:.3e}",
            f"{r.flops_saved:+.3e}",
            f"{100 * r.saved_fraction:+.1f}",
            f"{r.proxy_flops:.3e}",
            f"{r.same_choice}/{r.tasks}",
            str(r.stopped_trials),
        )
    console.print(table)
    console.print(
        f"E (dev): the chosen trials' final dev error, the one error stored for every trial; the "
        f"run's committed E (test) on these {len(replayed)} task(s) is {test_e:.4f}. Regret: Σ over "
        "tasks of E (dev) − dev selection's. Pruned trials are charged their steps so far "
        "(FLOPs ∝ steps); proxy FLOPs are the probe's passes at the checkpoints read (all "
        "its targets: an upper bound)."
    )
    for reason in skipped:
        console.print(f"[yellow]not replayed:[/] {reason}")


__all__ = ["proxies"]
