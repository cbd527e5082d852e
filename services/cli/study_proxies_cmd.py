"""``nevis study proxies``: what label-free proxies would have chosen, replayed from stored rows.

Why: LiDAR and RankMe are probed for every checkpoint; if they rank trials as dev error does,
a search could choose trials, or stop them at their 1/8 and 1/4 checkpoints, without dev
labels and with fewer FLOPs. This replays each policy of :mod:`services.core.proxy_policies`
on a probed run (no learner code runs) and prints E, cFLOP, regret and FLOPs saved against
dev selection. The headline E and regret are on held-out ``dev_test`` examples no selection
read (unbiased); the dev-error figures beside them are what dev selection itself optimised.
"""

from __future__ import annotations

import json

import typer
from rich.table import Column, Table

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import NevisError

console = make_console()
HELD_OUT = "dev_test examples of each trial's final-checkpoint probe sample, which no selection reads"


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
    1/4 checkpoints) against dev selection: E and regret on held-out dev_test examples (and on
    dev, labelled), cFLOP, FLOPs saved."""
    from dataclasses import asdict  # noqa: PLC0415 - imported when the command runs (fast start)

    from services.core.proxy_policies import ReplayError, summarise  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import make_engine, session_factory  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.probes.proxy_replay import load_replay_input  # noqa: PLC0415 - imported when the command runs (fast start)

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
                    "heldout_scored_on": HELD_OUT,
                    "dev_scored_on": "the final dev error dev selection minimised (biased for dev selection)",
                    "skipped": skipped,
                    "policies": [asdict(r) for r in rows],
                }
            )
        )
        return
    table = Table(
        Column("policy", no_wrap=True),
        "tasks",
        "E (held out)",
        "regret (held out)",
        "E (dev)",
        "regret (dev)",
        "cFLOP",
        "FLOPs saved",
        "saved %",
        "proxy FLOPs",
        "same as dev",
        "stopped",
        title=f"Run {submission}: trial choice replayed under label-free proxies (settings {replay.settings_hash})",
    )
    for r in rows:
        table.add_row(
            r.policy,
            str(r.tasks),
            "–" if r.e_heldout is None else f"{r.e_heldout:.4f}",
            "–" if r.regret_heldout is None else f"{r.regret_heldout:+.4f}",
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
    held = (
        ""
        if all(r.e_heldout is not None for r in rows)
        else (" (–: a chosen trial's final checkpoint was probed before held-out errors were recorded; probe it again)")
    )
    console.print(
        f"E (held out): the chosen trials' error on the {HELD_OUT}{held}; regret (held out): Σ over tasks "
        "of that error − dev selection's, either sign: the unbiased comparison. E (dev): their final dev "
        "error, which dev selection itself minimised, so its regret (dev) is ≥ 0 for every other policy "
        f"by construction. The run's committed E (test) on these {len(replayed)} task(s) is {test_e:.4f}. "
        "Pruned trials are charged their steps so far (FLOPs ∝ steps); proxy FLOPs are the probe's passes "
        "at the checkpoints read (all its targets: an upper bound)."
    )
    for reason in skipped:
        console.print(f"[yellow]not replayed:[/] {reason}")


__all__ = ["HELD_OUT", "proxies"]
