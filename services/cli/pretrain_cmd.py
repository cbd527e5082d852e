"""``nevis pretrain``: pretrained checkpoints for the PT learners, self-made or imported.

- ``nevis pretrain --stream S --out FILE``: self-pretraining. Pretrained weights cannot be
  downloaded on every machine; this runs a learner over a stream's meta-train tasks (an
  ordinary, recorded run: :mod:`workers.trainer.pretrain`) and writes the predictor of its last
  task, stamped with the run's id and cFLOP. Not the paper's PT: it is for ``pt_self`` and
  ``pt_ft_self`` (``ft_prev``, the default, makes a ResNet-34 one; ``--learner ft_prev_small``
  a small-CNN one for ``pt_self_small`` and ``pt_ft_self_small``).
- ``nevis pretrain import FILE --from torchvision-resnet34 --out CKPT --provenance TEXT``:
  weights pretrained elsewhere, converted (:mod:`workers.learners.pretrained_import`) and
  stamped with the declared provenance: the only checkpoints ``pt`` and ``pt_ft`` accept.

``nevis run --learner … --pretrained FILE`` uploads either to the object store.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import typer

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import LearnerError, NevisError

app = typer.Typer(
    help="Make a self-pretrained checkpoint (pt_self, pt_ft_self) from a stream's meta-train tasks, "
    "or import one pretrained elsewhere (pt, pt_ft): `nevis pretrain import`."
)


@app.callback(invoke_without_command=True)
def pretrain(
    ctx: typer.Context,
    stream: str = typer.Option("mini", "--stream", "-s", help="Stream whose meta-train tasks are learnt."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Checkpoint file to write (required)."),
    steps: int = typer.Option(200, "--steps", min=1, max=10_000_000, help="Optimisation steps per task."),
    trials: int = typer.Option(1, "--trials", min=1, max=10_000, help="Hyper-parameter trials per task."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the search and the trials."),
    learner: str = typer.Option(
        "ft_prev",
        "--learner",
        "-l",
        help="Learner that pretrains (its last predictor is the checkpoint); its network "
        "must be the PT learner's: ft_prev (ResNet-34) for pt_self / pt_ft_self, "
        "ft_prev_small (small CNN) for pt_self_small / pt_ft_self_small.",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
) -> None:
    """Run a learner over a stream's meta-train tasks and save its last predictor (self-pretraining)."""
    if ctx.invoked_subcommand is not None:
        return
    from services.store.db import upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.pretrain import pretrain as make_checkpoint  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415 - imported when the command runs (fast start)

    if out is None:
        raise NevisError(
            "nevis pretrain needs --out FILE (the checkpoint to write); "
            "`nevis pretrain import --help` imports weights pretrained elsewhere."
        )
    _check_out(out, force)
    settings = get_settings()
    ensure_sqlite_parent(settings.database_url)
    upgrade(settings.database_url)
    console = make_console()
    result = make_checkpoint(
        StreamRunner(settings),
        stream=stream,
        steps=steps,
        seed=seed,
        learner=learner,
        trials=trials,
        on_created=lambda run_id: console.print(
            f"Pretraining run {run_id}: {learner} on the meta-train tasks "
            f"of {stream} (resume with `nevis run --resume {run_id}`)."
        ),
    )
    out.write_bytes(result.checkpoint)
    digest = hashlib.sha256(result.checkpoint).hexdigest()
    console.print(
        f"Wrote {out}: {len(result.checkpoint):,} bytes, sha256 {digest[:12]}, after {result.tasks} "
        f"meta-train tasks ({result.flops:.3e} FLOPs, run {result.submission_id}, recorded in the "
        f"checkpoint). Self-pretrained, not the paper's PT: use it with `nevis run --learner "
        f"{pt_learner_for(learner)} --pretrained {out}` (a PT learner of the same network)."
    )


@app.command("import")
def import_checkpoint(
    file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="The pretrained weights (a torch file)."
    ),
    source: str = typer.Option(
        ...,
        "--from",
        help="What FILE is: torchvision-resnet34 (a torchvision ResNet-34 state dict, "
        "converted to the low-resolution ResNet-34) or nevis-predictor (a predictor "
        "file of this service, taken as it is).",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint file to write."),
    provenance: str = typer.Option(
        ...,
        "--provenance",
        help="Where the weights come from, in words: data, recipe, origin of the file. Recorded in the checkpoint.",
    ),
    stem: str = typer.Option(
        "resample",
        "--stem",
        help="torchvision's 7x7 stem: 'resample' (area-averaged to 3x3, its batch norm "
        "kept) or 'fresh' (left at initialisation).",
    ),
    image_size: int = typer.Option(
        64,
        "--image-size",
        min=8,
        max=1024,
        help="Side the checkpoint's own evaluation resizes to (PT+FT's probe of it).",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
) -> None:
    """Convert weights pretrained elsewhere into a checkpoint for pt / pt_ft, recording their provenance."""
    from workers.learners.pretrained_import import import_checkpoint as convert  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.learners.provenance import read_provenance  # noqa: PLC0415 - imported when the command runs (fast start)

    _check_out(out, force)
    try:
        checkpoint = convert(file.read_bytes(), source=source, declared=provenance, stem=stem, image_size=image_size)
        record = read_provenance(checkpoint)
    except LearnerError as exc:
        raise NevisError(f"Cannot import {file}: {exc}") from exc
    out.write_bytes(checkpoint)
    digest = hashlib.sha256(checkpoint).hexdigest()
    console = make_console()
    console.print(
        f"Wrote {out}: {len(checkpoint):,} bytes, sha256 {digest[:12]}, from {source} {file} "
        f"(sha256 {record.source_sha256[:12] if record and record.source_sha256 else '?'})."
    )
    if record is not None and record.mapping:
        console.print(f"Mapped: {record.mapping}.")
    console.print(f"Use it with `nevis run --learner pt --pretrained {out}` (or pt_ft).")


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not force:
        raise NevisError(f"--out {out} already exists; pass --force to overwrite it.")
    if not out.parent.is_dir():
        raise NevisError(f"--out {out}: folder {out.parent} does not exist.")


def pt_learner_for(learner: str) -> str:
    """The built-in self-pretrained PT learner whose network a checkpoint made by ``learner`` has (a
    guess from the name: the ``_small`` built-ins train the small CNN, the others the ResNet-34)."""
    return "pt_self_small" if learner.strip().endswith("_small") else "pt_self"


__all__ = ["app", "import_checkpoint", "pretrain", "pt_learner_for"]
