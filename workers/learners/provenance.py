"""Where a pretrained checkpoint's weights come from, recorded in the checkpoint itself.

NEVIS'22's PT starts from a ResNet-34 pretrained on outside data (ImageNet). A checkpoint made
here by ``nevis pretrain`` was pretrained on the stream's own meta-train tasks: that is
self-pretraining, another baseline, and its E must not pass for the paper's PT. So a checkpoint
says which it is:

- ``external``: written by ``nevis pretrain import`` from weights made elsewhere (a torchvision
  ResNet-34 state dict, or a predictor file of this service), with the operator's declaration
  (what data, what recipe, where the file came from) and the sha256 of the imported file. The
  only kind the paper-named ``pt`` / ``pt_ft`` accept.
- ``self``: written by ``nevis pretrain``, with the pretraining run's submission id and cFLOP,
  so the FLOPs spent pretraining can be shown beside the PT run's own. ``pt_self`` /
  ``pt_ft_self`` accept it, and a checkpoint with no record (any file of
  ``IndepLearner.save_predictor``).

The record is one more key, ``provenance``, of the predictor file (a dict saved with
``torch.save``); the predictor loader reads only the keys it knows, so every learner that reads
such files still does. Nothing here imports learner code: ``nevis pretrain`` stamps with it.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from services.core.errors import LearnerError

EXTERNAL = "external"
SELF = "self"
PROVENANCE_KEY = "provenance"
MAX_DECLARED = 2000
"""Characters a declaration may have (a sentence or a paragraph, not a file)."""

Origin = Literal["external", "self"]


@dataclass(frozen=True)
class Provenance:
    """Where a checkpoint's weights come from.

    Attributes:
        origin: ``external`` (pretrained elsewhere, declared) or ``self`` (``nevis pretrain``).
        declared: the operator's declaration (external) or the sentence ``nevis pretrain`` writes.
        source: what was read: ``torchvision-resnet34``, ``nevis-predictor`` or ``nevis pretrain``.
        source_sha256: the digest of the imported file (external).
        mapping: what the conversion mapped and what it left at initialisation (imports).
        submission_id: the pretraining run (self), to look its FLOPs and tasks up.
        cflop: that run's cFLOP (self): what pretraining cost, never charged to the PT run.
    """

    origin: Origin
    declared: str
    source: str
    source_sha256: str | None = None
    mapping: str | None = None
    submission_id: int | None = None
    cflop: float | None = None

    def __post_init__(self) -> None:
        if self.origin not in (EXTERNAL, SELF):
            raise ValueError(f"A provenance's origin is {EXTERNAL!r} or {SELF!r}; got {self.origin!r}.")
        if not isinstance(self.declared, str) or not self.declared.strip():
            raise ValueError("A provenance needs a declaration: where the weights come from, in words.")
        if len(self.declared) > MAX_DECLARED:
            raise ValueError(
                f"A provenance's declaration has at most {MAX_DECLARED} characters; got {len(self.declared)}."
            )


def read_provenance(checkpoint: bytes) -> Provenance | None:
    """The provenance a checkpoint records, or None where it records none.

    Raises:
        LearnerError: the bytes are not a readable torch file, or the record is malformed.
    """
    record = _load(checkpoint).get(PROVENANCE_KEY)
    if record is None:
        return None
    known = {f.name for f in fields(Provenance)}
    if not isinstance(record, dict) or not known >= set(record):
        raise LearnerError(f"The checkpoint's provenance record is malformed: {record!r}.")
    try:
        return Provenance(**record)
    except (TypeError, ValueError) as exc:
        raise LearnerError(f"The checkpoint's provenance record is malformed: {exc}") from exc


def pretraining_cflop(checkpoint: bytes) -> float | None:
    """The cFLOP a self-pretrained checkpoint records for the run that made it (shown beside a
    PT run's own cFLOP); None for any other checkpoint, or bytes that are no predictor file."""
    try:
        provenance = read_provenance(checkpoint)
    except LearnerError:  # a custom learner's checkpoint: not ours to read
        return None
    if provenance is None or provenance.origin != SELF or provenance.cflop is None:
        return None
    return float(provenance.cflop)


def stamp(checkpoint: bytes, provenance: Provenance) -> bytes:
    """``checkpoint`` with ``provenance`` recorded (any earlier record replaced).

    Raises:
        LearnerError: ``checkpoint`` is not a predictor file (a dict with a ``state_dict``).
    """
    blob = _load(checkpoint)
    if "state_dict" not in blob:
        raise LearnerError(
            "The checkpoint is not a predictor file: it has no 'state_dict'. Was it written by "
            "IndepLearner.save_predictor, `nevis pretrain` or `nevis pretrain import`?"
        )
    blob[PROVENANCE_KEY] = asdict(provenance)
    import torch  # noqa: PLC0415 - here, not at import: the run's driver reads provenance without torch

    buffer = io.BytesIO()
    torch.save(blob, buffer)
    return buffer.getvalue()


def _load(checkpoint: bytes) -> dict[str, Any]:
    import torch  # noqa: PLC0415 - only a checkpoint's reader pays torch's import (2 s in a run's driver)

    try:
        blob = torch.load(io.BytesIO(checkpoint), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several unrelated types for bad bytes
        raise LearnerError(f"Cannot read the pretrained checkpoint: {exc}") from exc
    if not isinstance(blob, dict):
        raise LearnerError(f"The pretrained checkpoint is a {type(blob).__name__}, not a predictor file.")
    return blob


__all__ = [
    "EXTERNAL",
    "MAX_DECLARED",
    "PROVENANCE_KEY",
    "SELF",
    "Origin",
    "Provenance",
    "pretraining_cflop",
    "read_provenance",
    "stamp",
]
