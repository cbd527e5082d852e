"""``nevis pretrain``: a pretrained checkpoint made here, for ``pt`` and ``pt_ft`` runs.

Pretrained weights cannot be downloaded on every machine; this makes a checkpoint from a
stream's meta-train tasks (:mod:`workers.trainer.pretrain`) and writes it to a file that
``nevis run --learner pt --pretrained FILE`` uploads to the object store.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import typer

from services.cli.console import make_console
from services.cli.data_cmd import _SIZE, _context
from services.core.errors import NevisError


def pretrain(
    stream: str = typer.Option("mini", "--stream", "-s", help="Stream whose meta-train tasks are learnt."),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint file to write."),
    steps: int = typer.Option(200, "--steps", min=1, max=1_000_000, help="Optimisation steps per task."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the training."),
    model: str = typer.Option("small_cnn", "--model", help="Network: small_cnn, resnet34 or vgg."),
    image_size: int | None = _SIZE,
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
) -> None:
    """Train through a stream's meta-train tasks (FT-prev, fixed recipe) and save the last network."""
    from workers.stream.prepare import prepare_stream  # noqa: PLC0415
    from workers.trainer.pretrain import pretrain as make_checkpoint  # noqa: PLC0415

    if out.exists() and not force:
        raise NevisError(f"--out {out} already exists; pass --force to overwrite it.")
    if not out.parent.is_dir():
        raise NevisError(f"--out {out}: folder {out.parent} does not exist.")
    manifest, store, size, offline_dir = _context(stream, image_size)
    console = make_console()
    prepare_stream(manifest, store, image_size=size, offline_dir=offline_dir)

    def show(task, position: int, total: int) -> None:  # noqa: ANN001 - a TaskSpec
        console.print(f"task {position}/{total}: {task.key} ({steps} steps)")

    result = make_checkpoint(manifest, store, image_size=size, steps=steps, seed=seed, model=model,
                             on_task=show)
    out.write_bytes(result.checkpoint)
    digest = hashlib.sha256(result.checkpoint).hexdigest()
    console.print(f"Wrote {out}: {len(result.checkpoint):,} bytes, sha256 {digest[:12]}, from "
                  f"{len(result.tasks)} meta-train tasks of {manifest.name} at {size}px, "
                  f"{result.flops:.3e} FLOPs. Use it with `nevis run --learner pt --pretrained {out}`.")


__all__ = ["pretrain"]
