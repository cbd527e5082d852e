"""``nevis pretrain``: a pretrained checkpoint made here, for ``pt`` and ``pt_ft`` runs.

Pretrained weights cannot be downloaded on every machine; this runs a learner over a
stream's meta-train tasks (an ordinary, recorded run: :mod:`workers.trainer.pretrain`) and
writes the predictor of its last task to a file that ``nevis run --learner pt --pretrained
FILE`` uploads to the object store. The checkpoint has the pretraining learner's network:
``ft_prev`` (the default) makes a ResNet-34 one for ``pt`` and ``pt_ft``, ``--learner
ft_prev_small`` a small-CNN one for ``pt_small`` and ``pt_ft_small``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import typer

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import NevisError


def pretrain(
    stream: str = typer.Option("mini", "--stream", "-s", help="Stream whose meta-train tasks are learnt."),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint file to write."),
    steps: int = typer.Option(200, "--steps", min=1, max=10_000_000, help="Optimisation steps per task."),
    trials: int = typer.Option(1, "--trials", min=1, max=10_000, help="Hyper-parameter trials per task."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the search and the trials."),
    learner: str = typer.Option("ft_prev", "--learner", "-l",
                                help="Learner that pretrains (its last predictor is the checkpoint); its network "
                                     "must be the PT learner's: ft_prev (ResNet-34) for pt / pt_ft, "
                                     "ft_prev_small (small CNN) for pt_small / pt_ft_small."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
) -> None:
    """Run a learner over a stream's meta-train tasks and save its last predictor."""
    from services.store.db import upgrade  # noqa: PLC0415
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415
    from workers.trainer.pretrain import pretrain as make_checkpoint  # noqa: PLC0415
    from workers.trainer.stream_runner import StreamRunner  # noqa: PLC0415

    if out.exists() and not force:
        raise NevisError(f"--out {out} already exists; pass --force to overwrite it.")
    if not out.parent.is_dir():
        raise NevisError(f"--out {out}: folder {out.parent} does not exist.")
    settings = get_settings()
    ensure_sqlite_parent(settings.database_url)
    upgrade(settings.database_url)
    console = make_console()
    result = make_checkpoint(
        StreamRunner(settings), stream=stream, steps=steps, seed=seed, learner=learner, trials=trials,
        on_created=lambda run_id: console.print(f"Pretraining run {run_id}: {learner} on the meta-train tasks "
                                                f"of {stream} (resume with `nevis run --resume {run_id}`)."))
    out.write_bytes(result.checkpoint)
    digest = hashlib.sha256(result.checkpoint).hexdigest()
    console.print(f"Wrote {out}: {len(result.checkpoint):,} bytes, sha256 {digest[:12]}, after {result.tasks} "
                  f"meta-train tasks ({result.flops:.3e} FLOPs, run {result.submission_id}). "
                  f"Use it with `nevis run --learner {pt_learner_for(learner)} --pretrained {out}` "
                  "(a PT learner of the same network).")


def pt_learner_for(learner: str) -> str:
    """The built-in PT learner whose network a checkpoint made by ``learner`` has (a guess from
    the name: the ``_small`` built-ins train the small CNN, the others the ResNet-34)."""
    return "pt_small" if learner.strip().endswith("_small") else "pt"


__all__ = ["pretrain", "pt_learner_for"]
