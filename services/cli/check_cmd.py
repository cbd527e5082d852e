"""``nevis check FOLDER --entrypoint mod:make``: a learner's protocol calls, judged before submitting.

The folder is packed exactly as ``nevis submit`` packs it (:mod:`services.cli.client.bundle`)
and unpacked into a scratch folder, so the check runs the very files a submission uploads, in
the same sandbox a run uses (:mod:`services.cli.check.calls`). It prints one row per call and
exits 1 at the first broken one, naming the fix.

``nevis check --image REF --entrypoint mod:make`` checks a learner image instead: read from
podman (a ``localhost/`` image built here from podman's own store) and unpacked within the
image caps exactly as a worker unpacks it (:mod:`workers.sandbox.images`, cached under
``<data dir>/images``), its ``/opt/learner`` and site-packages the hosts' import paths. Nothing
of the image runs but the learner's calls, in the sandbox.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from services.cli.console import make_console

console = make_console()
STYLE = {"ok": "green", "warn": "yellow", "FAIL": "bold red"}
OUTPUT_LINES = 40


def check(
    folder: Path | None = typer.Argument(
        None, help="The learner's folder (what `nevis submit` would upload); or give --image."
    ),
    entrypoint: str = typer.Option(..., "--entrypoint", "-e", help="module:factory that makes the learner."),
    image: str | None = typer.Option(
        None, "--image", help="Check this learner image (podman's; localhost/... if built here) instead of a folder."
    ),
    steps: int = typer.Option(8, "--steps", help="Optimisation steps per task (checkpoints at 0, half and all)."),
) -> None:
    """Run each protocol call of a learner once on a tiny built-in stream; exit 1 on the first broken one."""
    if (folder is None) == (image is None):
        raise typer.BadParameter("give a learner folder or --image REF (one of them)", param_hint="FOLDER")
    if image is not None:
        ok = check_image(image, entrypoint, console=console, steps=steps)
    else:
        ok = check_folder(folder, entrypoint, console=console, steps=steps)
    if not ok:
        raise typer.Exit(1)


def check_folder(folder: Path, entrypoint: str, *, console: Console, steps: int = 8) -> bool:
    """Check the learner in ``folder``; prints the table; True when no call is broken."""
    from services.cli.client.bundle import pack_learner  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.sandbox.bundles import extract_bundle  # noqa: PLC0415 - imported when the command runs (fast start)

    with tempfile.TemporaryDirectory(prefix="nevis-check-") as scratch:
        packed = pack_learner(folder, entrypoint=entrypoint, dest=Path(scratch))
        root = extract_bundle(packed.path, Path(scratch) / "unpacked", kind="tar")
        return check_paths(
            (str(root),), entrypoint, what=f"{folder} ({len(packed.files)} files)", console=console, steps=steps
        )


def check_image(ref: str, entrypoint: str, *, console: Console, steps: int = 8) -> bool:
    """Check the learner image ``ref`` (unpacked as a worker would); prints why an image that
    cannot be used fails before any call; True when no call is broken."""
    from services.coordinator.common.validation import check_image_ref  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.coordinator.learner_images import check_learner_image  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.core.config import get_settings  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.sandbox.images import ImageError, ImageLimits, unpack_image  # noqa: PLC0415 - imported when the command runs (fast start)

    check_image_ref(ref, field="--image")  # a reference, never an option, before podman sees it
    try:
        with console.status(f"reading the image {ref} …"):
            unpacked = unpack_image(ref, cache=get_settings().data_dir / "images", limits=ImageLimits())
        check_learner_image(unpacked, ref=ref, entrypoint=entrypoint)
    except ImageError as exc:
        console.print(f"[bold red]The image cannot be used[/] ({exc.field or 'image'}): {exc}")
        return False
    what = f"{unpacked.pinned} ({unpacked.files} files, {unpacked.size_bytes} bytes unpacked)"
    return check_paths(unpacked.import_paths, entrypoint, what=what, console=console, steps=steps)


def check_paths(paths: tuple[str, ...], entrypoint: str, *, what: str, console: Console, steps: int = 8) -> bool:
    """Check ``entrypoint`` imported from ``paths`` (read-only in its hosts); prints the table."""
    from services.cli.check.calls import CallOutcome, CheckRun  # noqa: PLC0415 - heavy (numpy, sklearn)
    from services.core.config import get_settings  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.sandbox.limits import HostLimits  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    console.print(f"Checking {entrypoint} from {what} on a two-task stream …")
    with console.status("starting the learner's sandboxed host …") as spinner:

        def shown(row: CallOutcome) -> None:
            spinner.update(f"{row.call} {'' if row.task is None else f'(task {row.task}) '}{row.status}; next …")

        checked = CheckRun(
            Path(paths[0]),
            entrypoint,
            sandbox=settings.sandbox,
            steps=steps,
            limits=HostLimits.from_settings(settings),
            on_outcome=shown,
            more_paths=tuple(paths[1:]),
        )
        outcomes = checked.run()
    table = Table("call", "task", "outcome", "detail", "s", title=f"nevis check {entrypoint}")
    for row in outcomes:
        table.add_row(
            row.call,
            "" if row.task is None else str(row.task),
            f"[{STYLE[row.status]}]{row.status}[/]",
            row.detail,
            f"{row.seconds:.1f}",
        )
    console.print(table)
    for row in outcomes:
        if row.fix:
            label = "fix" if row.status == "FAIL" else "hint"
            console.print(f"[{STYLE[row.status]}]{label} ({row.call}):[/] {row.fix}")
    broken = any(row.status == "FAIL" for row in outcomes)
    if broken and checked.output.strip():
        show_output(console, checked.output)
    console.print(
        "[bold red]The learner is broken[/] (above: the call and the fix)."
        if broken
        else "[green]Every protocol call works.[/] Submit it with `nevis submit`."
    )
    return not broken


def show_output(console: Console, output: bytes, *, lines: int = OUTPUT_LINES) -> None:
    """The end of what the learner printed, its traceback included: the check captures the
    hosts' output (as a run keeps it for `nevis logs`), so a broken call shows it here."""
    text = output.decode("utf-8", "replace").rstrip().splitlines()
    console.rule(f"the learner's output (last {min(lines, len(text))} of {len(text)} lines)")
    console.print("\n".join(text[-lines:]), markup=False, highlight=False)
    console.rule()


__all__ = ["check", "check_folder", "check_image", "check_paths", "show_output"]
