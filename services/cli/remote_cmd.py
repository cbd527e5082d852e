"""The ``nevis`` commands that talk to a remote service: login, submit, status, cancel, logs, leaderboard.

They sit beside the local ones (``nevis run`` / ``nevis results`` read a local database;
these read the service ``nevis login`` named) and go through :mod:`services.cli.client`.
A refusal from the service is its problem's title and detail on one line, exit code 2
(:func:`services.cli.main.main`), never a traceback.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from services.cli.client import ApiProblem, Learner, NevisClient, PackedLearner
from services.cli.client.credentials import Credentials, normalise_url, save_credentials
from services.cli.console import make_console
from services.cli.run_cmd import known_ruleset
from services.cli.uncertainty_cmd import interval_doc_text

console = make_console()


def login(
    url: str = typer.Argument(..., help="The service's base URL, e.g. https://nevis.example.org."),
    token: str | None = typer.Option(
        None, "--token", help="The API token (default: prompted for, or read from stdin)."
    ),
) -> None:
    """Check a token against the service and keep both for the other commands (mode 0600)."""
    url = normalise_url(url)
    if token is None:
        token = (typer.prompt("API token", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()).strip()
    if not token:
        raise typer.BadParameter("an empty token", param_hint="token")
    with NevisClient(url, token) as client:
        me = client.me()
    path = save_credentials(Credentials(url=url, token=token))
    console.print(f"Logged in to {url} as {me['name']} ({me['role']}); credentials kept in {path} (mode 0600).")


def submit(
    folder: Path | None = typer.Argument(
        None, help="The learner's folder (packed as a bundle; caches and VCS folders left out); or give --image."
    ),
    entrypoint: str = typer.Option(..., "--entrypoint", "-e", help="module:factory that makes the learner."),
    image: str | None = typer.Option(
        None, "--image", help="Submit this learner image (registered by digest) instead of a folder."
    ),
    stream: str = typer.Option(..., "--stream", "-s", help="Stream name on the service (GET /v1/streams)."),
    trials: int | None = typer.Option(
        None, "--trials", help="Hyper-parameter trials per task (default: the service's)."
    ),
    steps: int | None = typer.Option(None, "--steps", help="Optimisation steps per trial (default: the service's)."),
    phase: str = typer.Option("meta_test", "--phase", help="meta_test (ranked) or meta_train (development)."),
    private: bool = typer.Option(
        False, "--private", help="Keep it off the public leaderboard (you and admins see it)."
    ),
    pin: bool = typer.Option(False, "--pin", help="Re-run it on each new version of the stream."),
    code_url: str | None = typer.Option(
        None,
        "--code-url",
        help="Where the learner's code is public (https://...); without it the leaderboard marks the run 'code not public'.",
    ),
    ruleset: str = typer.Option(
        "open",
        "--ruleset",
        callback=lambda v: known_ruleset(v, "--ruleset"),
        help="Rules to compete under (docs/rules.md): open, budget-<X>[-total-<Y>] or self-tuning; each has its own leaderboard.",
    ),
    name: str | None = typer.Option(
        None, "--name", help="Learner name when registering (default: folder name + content hash)."
    ),
    cpus: float = typer.Option(1.0, "--cpus", help="CPUs per task the learner is registered with."),
    gpus: int = typer.Option(0, "--gpus", help="GPUs per task the learner is registered with."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip `nevis check` before uploading."),
    detach: bool = typer.Option(False, "--detach", help="Do not follow the run; print its id and return."),
) -> None:
    """Check, pack and register a learner (re-using an identical one), submit it, and follow the run."""
    from services.cli.check_cmd import check_folder, check_image  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.cli.remote_follow import detached, follow  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.cli.remote_image import image_learner  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.coordinator.common.validation import (  # noqa: PLC0415 - imported when the command runs (fast start)
        check_code_url,
        check_entrypoint,
        check_image_ref,
        check_name,
        check_resources,
    )

    check_entrypoint(entrypoint)  # the server's own field checks, before anything runs or uploads
    check_resources({"cpus": cpus, "gpus": gpus})
    if name is not None:
        check_name(name)
    if code_url is not None:
        check_code_url(code_url, field="--code-url")
    if (folder is None) == (image is None):
        raise typer.BadParameter("give a learner folder or --image REF (one of them)", param_hint="FOLDER")
    if image is not None:
        check_image_ref(image, field="--image")  # before podman sees it
    checked = no_check or (
        check_image(image, entrypoint, console=console)
        if image is not None
        else check_folder(folder, entrypoint, console=console)
    )
    if not checked:
        console.print("Nothing was submitted (`--no-check` skips the check).")
        raise typer.Exit(1)
    with NevisClient.from_login() as client, tempfile.TemporaryDirectory(prefix="nevis-submit-") as scratch:
        if image is not None:
            learner = image_learner(
                client, image, entrypoint=entrypoint, name=name, cpus=cpus, gpus=gpus, console=console
            )
        else:
            learner = _bundle_learner(client, folder, Path(scratch), entrypoint, name=name, cpus=cpus, gpus=gpus)
        budget = {k: v for k, v in (("trials", trials), ("steps", steps)) if v is not None}
        doc = client.submit(
            learner_id=learner.id,
            stream=stream,
            phase=phase,
            budget=budget,
            private=private,
            pinned=pin,
            code_url=code_url,
            ruleset=ruleset,
        )
        try:  # from here on, Ctrl-C detaches: the submission is queued whatever happens here
            console.print(
                f"Submission {doc['id']}: {learner.name} on {doc['stream']['name']} "
                f"{doc['stream']['version']} ({doc['phase']}), {doc['status']}."
            )
            final = None if detach else follow(client, doc["id"], console=console)
        except KeyboardInterrupt:
            final = detached(doc["id"], console)
        if final is None:
            return
        show_submission(final)
        if final["status"] == "failed":
            raise typer.Exit(1)


def _bundle_learner(
    client: NevisClient, folder: Path, scratch: Path, entrypoint: str, *, name: str | None, cpus: float, gpus: int
) -> Learner:
    """The user's learner of ``folder``'s bundle and ``entrypoint``: found, or uploaded."""
    from services.cli.client.bundle import pack_learner  # noqa: PLC0415 - imported when the command runs (fast start)

    packed = pack_learner(folder, entrypoint=entrypoint, dest=scratch)
    learner = client.find_learner(sha256=packed.sha256, entrypoint=entrypoint)
    if learner is not None:
        console.print(
            f"Re-using learner {learner.id} ({learner.name}): same bundle (sha256 {packed.sha256[:12]}…) "
            "and entry point."
        )
        return learner
    learner = register(
        client,
        packed,
        name=name or default_name(folder, packed.sha256),
        entrypoint=entrypoint,
        cpus=cpus,
        gpus=gpus,
        retry_name=name is None,
    )
    console.print(
        f"Registered learner {learner.id} ({learner.name}): {len(packed.files)} files, "
        f"{packed.size_bytes} bytes, sha256 {packed.sha256[:12]}…"
    )
    return learner


def register(
    client: NevisClient, packed: PackedLearner, *, name: str, entrypoint: str, cpus: float, gpus: int, retry_name: bool
) -> Learner:
    """Upload the bundle as a new learner; a default name another user holds already (names are
    global) gets a random suffix once."""
    try:
        return client.upload_bundle(packed.path, name=name, entrypoint=entrypoint, cpus=cpus, gpus=gpus)
    except ApiProblem as exc:
        if exc.status != 409 or exc.field != "name" or not retry_name:
            raise
        return client.upload_bundle(
            packed.path, name=f"{name[:80]}-{uuid.uuid4().hex[:6]}", entrypoint=entrypoint, cpus=cpus, gpus=gpus
        )


def default_name(folder: Path, sha256: str) -> str:
    """``<folder>-<hash>``: unique per content, within the API's name rules."""
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in folder.resolve().name).strip("-._") or "learner"
    return f"{base[:80]}-{sha256[:10]}"


def status(
    submission_id: int | None = typer.Argument(None, help="A submission id; without one, your recent submissions."),
    as_json: bool = typer.Option(False, "--json", help="Print the API's JSON."),
    limit: int = typer.Option(20, "--limit", help="How many submissions to list."),
) -> None:
    """A remote submission: status, current task, per-task errors, E and cFLOP (or a list of yours)."""
    with NevisClient.from_login() as client:
        doc = client.submission(submission_id) if submission_id is not None else client.submissions(limit=limit)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
    elif submission_id is not None:
        show_submission(doc)
    else:
        table = Table(
            "id", "learner", "stream", "phase", "status", "task", "created", title=f"Submissions ({doc['total']})"
        )
        for item in doc["items"]:
            table.add_row(
                str(item["id"]),
                item["learner"]["name"],
                f"{item['stream']['name']} {item['stream']['version']}",
                item["phase"],
                item["status"],
                str(item["cursor"]),
                item["created_at"][:19],
            )
        console.print(table)


def show_submission(doc: dict[str, Any]) -> None:
    table = Table(
        "task",
        "year",
        "phase",
        "dataset",
        "status",
        "error",
        "FLOPs",
        "trials (failed)",
        title=f"Submission {doc['id']}: {doc['learner']['name']} on {doc['stream']['name']} "
        f"{doc['stream']['version']} ({doc['phase']}, ruleset {doc.get('ruleset', 'open')})",
    )
    for task in doc["tasks"]:
        table.add_row(
            str(task["order"]),
            str(task["year"]),
            task["phase"],
            task["dataset"],
            task["status"],
            "" if task["error"] is None else f"{task['error']:.4f}",
            f"{task['flops']:.3e}",
            f"{task['trials']} ({task['failed_trials']})" if task["trials"] else "",
        )
    console.print(table)
    e_text = "n/a" if doc["e"] is None else f"{doc['e']:.4f}{interval_doc_text(doc.get('error_interval'))}"
    console.print(
        f"E ({doc['phase']}, {doc['scored_tasks']}/{doc['headline_tasks']} tasks) = {e_text}  "
        f"cFLOP = {doc['cflop']:.4e}"
    )
    console.print(f"status: {doc['status']}" + (f" ({doc['error']})" if doc.get("error") else ""))


def cancel(submission_id: int = typer.Argument(..., help="The submission to cancel.")) -> None:
    """Cancel a queued or running remote submission."""
    with NevisClient.from_login() as client:
        doc = client.cancel(submission_id)
    console.print(f"Submission {doc['id']}: {doc['status']}.")


def logs(
    submission_id: int = typer.Argument(..., help="The submission (yours, or any for an admin)."),
    task: int | None = typer.Option(None, "--task", help="Only this task (by stream order)."),
    trial: int | None = typer.Option(None, "--trial", help="Only this trial index."),
    tail_bytes: int | None = typer.Option(
        None, "--tail-bytes", help="The most bytes of each log shown: its last ones (default: the service's, 64 KiB)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the API's JSON."),
) -> None:
    """What a submission's learner hosts printed, and the tracebacks of what failed, per trial and prediction job."""
    with NevisClient.from_login() as client:
        doc = client.logs(submission_id, task=task, trial=trial, tail_bytes=tail_bytes)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    if not doc["items"]:
        console.print(
            f"Submission {submission_id}: no logs"
            + (" that match" if task is not None or trial is not None else " yet")
            + "."
        )
    for item in doc["items"]:
        what = (
            "prepare_task"
            if item.get("kind") == "preparation"
            else "prediction job"
            if item["trial"] is None
            else f"trial {item['trial']} ({item['status']})"
        )
        cut = ", last bytes only" if item["truncated"] else ""
        console.rule(f"task {item['task']} attempt {item['attempt']}, {what}{cut}", style="dim")
        typer.echo(item["text"].rstrip("\n") or "(empty)")


def leaderboard(
    stream: str = typer.Option(..., "--stream", "-s", help="Stream name."),
    version: str | None = typer.Option(None, "--version", help="Stream version (default: the newest)."),
    limit: int = typer.Option(20, "--limit", help="Rows to show."),
    ruleset: str = typer.Option(
        "open",
        "--ruleset",
        callback=lambda v: known_ruleset(v, "--ruleset"),
        help="Whose board: each ruleset (open, budget-<X>, self-tuning) has its own.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the API's JSON."),
) -> None:
    """The service's leaderboard of a stream under one ruleset: meta-test submissions ranked by
    E (then cFLOP), with the profile score and whether the learner's code is public."""
    with NevisClient.from_login() as client:
        doc = client.leaderboard(stream, version=version, limit=limit, ruleset=ruleset)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    table = Table(
        "rank",
        "submission",
        "learner",
        "owner",
        "E",
        "cFLOP",
        "profile",
        "code",
        "tasks",
        "status",
        title=f"Leaderboard: {doc['stream'] or stream} {doc['version'] or ''} ({doc['phase']}, ruleset "
        f"{doc.get('ruleset', ruleset)}), {doc['total']} rows",
    )
    for row in doc["items"]:
        table.add_row(
            "" if row["rank"] is None else str(row["rank"]),
            str(row["submission_id"]),
            row["learner"],
            row["owner"] or "(local)",
            "" if row["mean_error"] is None else f"{row['mean_error']:.4f}",
            f"{row['cflop']:.3e}",
            "" if row.get("profile_score") is None else f"{row['profile_score']:.3f}",
            "public" if row.get("code_public") else "not public",
            f"{row['headline_done']}/{row['headline_tasks']}",
            row["status"],
        )
    console.print(table)


__all__ = ["cancel", "default_name", "leaderboard", "login", "logs", "register", "show_submission", "status", "submit"]
