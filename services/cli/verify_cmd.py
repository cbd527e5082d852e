"""``nevis verify ID --seeds N``: replay a finished public run with new seeds and mark it.

Runs the replays here, one after another, on the local database and object store (as ``nevis
run`` does), then judges them (:mod:`services.store.runs.verification`): the original is
``verified`` when every replay's E falls inside its 95 % interval on this benchmark, ``not
reproduced`` otherwise. The original's numbers are never changed, and the replays are no
leaderboard rows of their own. ``--show`` prints the verification so far without replaying.
A service verifies with ``POST /v1/submissions/{id}/verify`` (operators) instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings

if TYPE_CHECKING:  # the store and the trainer are imported when a command runs (startup time)
    from sqlalchemy.orm import Session, sessionmaker

    from services.store.runs.verdicts import Verification
    from workers.trainer.stream_runner import StreamRunner

console = make_console()

MARK_TEXT = {
    "verified": "[green]verified[/]",
    "not_reproduced": "[red]not reproduced[/]",
    "pending": "[yellow]pending[/] (replays not ended)",
    "inconclusive": "[yellow]inconclusive[/]",
}


def verify(
    run_id: int = typer.Argument(..., help="The finished public run (submission) to replay."),
    seeds: int = typer.Option(2, "--seeds", min=1, help="How many replays, each with a new seed."),
    show: bool = typer.Option(False, "--show", help="Print the verification so far; replay nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Replay run ID with new seeds and mark it verified or not reproduced."""
    from services.store.db import sessions_on, upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    if show:
        upgrade(settings.database_url)
        found = current(sessions_on(settings.database_url), run_id)
    else:
        upgrade(settings.database_url)
        with StreamRunner(settings) as runner:
            found = verify_locally(runner, run_id, seeds=seeds, requested_by="cli")
    if as_json:
        typer.echo(json.dumps(found.to_dict(), indent=2))
        return
    print_verification(found)


def verify_locally(runner: StreamRunner, run_id: int, *, seeds: int, requested_by: str | None = None) -> Verification:
    """Make ``seeds`` replays of ``run_id``, run each to its end with ``runner`` and judge
    them; the :class:`~services.store.runs.verdicts.Verification`."""
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.runs.verification import request_replays, settle  # noqa: PLC0415 - imported when the command runs (fast start)

    with transaction(runner.sessions) as session:
        replay_ids = [
            r.id for r in request_replays(session, submission_id=run_id, seeds=seeds, requested_by=requested_by)
        ]
    for replay_id in replay_ids:
        console.print(f"Replay {replay_id} of run {run_id}.")
        try:
            runner.run(replay_id)
        except Exception as exc:  # noqa: BLE001 - a replay that fails makes the verdict inconclusive, not an error
            console.print(f"[yellow]Replay {replay_id} failed:[/] {exc}")
    with transaction(runner.sessions) as session:
        settle(session, runner.store, submission_id=run_id)
    return current(runner.sessions, run_id)


def current(sessions: sessionmaker[Session], run_id: int) -> Verification:
    """The run's verification as stored now."""
    from services.store.runs.verdicts import verification_of  # noqa: PLC0415 - imported when the command runs (fast start)

    with sessions() as session:
        return verification_of(session, submission_id=run_id)


def stored_mark_line(run_id: int) -> str:
    """:func:`mark_line` of a run in the local database (``nevis results``)."""
    from services.store.db import sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)

    return mark_line(current(sessions_on(get_settings().database_url), run_id))


def mark_line(verification: Verification) -> str:
    """One line for ``nevis results``: the mark and its replays; empty when never verified."""
    if verification.replay_of is not None:
        return f"replay of run {verification.replay_of} (not a leaderboard row of its own)"
    if verification.verdict is None:
        return ""
    ids = ", ".join(str(r["id"]) for r in verification.replays)
    return f"verification: {MARK_TEXT[verification.verdict]} (replays {ids})" + (
        f": {verification.note}" if verification.note else ""
    )


def print_verification(verification: Verification) -> None:
    """The verdict, the interval it was judged by and each replay."""
    if verification.verdict is None:
        console.print(mark_line(verification) or f"Run {verification.submission_id} was never verified.")
        return
    table = Table("replay", "seed", "status", "E", "inside", title=f"Run {verification.submission_id}: replays")
    for replay in verification.replays:
        error = replay["error"]
        inside = replay["inside"]
        table.add_row(
            str(replay["id"]),
            str(replay["seed"]),
            replay["status"] or "",
            "" if error is None else f"{error:.4f}",
            "" if inside is None else ("yes" if inside else "no"),
        )
    console.print(table)
    if verification.interval is not None:
        low, high, level = verification.interval
        console.print(f"interval of E judged by: [{low:.4f}, {high:.4f}] ({level:.0%}, this benchmark)")
    console.print(mark_line(verification))


__all__ = ["MARK_TEXT", "current", "mark_line", "print_verification", "stored_mark_line", "verify", "verify_locally"]
