"""The PT baselines: a pretrained checkpoint as the start (NEVIS'22, Section 5).

- **PT** (``pt``) starts every task from the checkpoint the run was submitted with, and
  **PT+FT** (``pt_ft``) is FT-d with that checkpoint as one more candidate. The paper's PT
  starts from a network pretrained on outside data (ImageNet), so these accept only a
  checkpoint that declares such a provenance (``nevis pretrain import``,
  :mod:`workers.learners.pretrained_import`), and refuse any other, naming the way out.
- **Self-pretraining** (``pt_self``, ``pt_ft_self``) is the same learners on a checkpoint made
  here by ``nevis pretrain`` (FT-prev over the stream's own meta-train tasks): not the paper's
  PT, and named so that its E never passes for it. They refuse a checkpoint declared external.

Every PT learner also checks the checkpoint's network is its own before it trains or ranks.
The provenance is read from the checkpoint (:mod:`workers.learners.provenance`).
"""

from __future__ import annotations

from collections.abc import Iterator

from services.core.errors import LearnerError
from workers.learners.finetune import FtDLearner, check_same_network, digest, transfer_backbone
from workers.learners.indep import IndepLearner, IndepPredictor
from workers.learners.protocol import TaskView, TrialContext
from workers.learners.provenance import EXTERNAL, SELF, Origin, Provenance, read_provenance
from workers.learners.selection import PRETRAINED, FeatureFn
from workers.learners.trial_options import TrialOptions

PRETRAINED_MISMATCH = (
    "the run's pretrained checkpoint was made with another network. Make a checkpoint with "
    "the same network as this learner: `nevis pretrain import` (the ResNet-34) for pt and pt_ft; "
    "`nevis pretrain` (FT-prev, the ResNet-34) for pt_self and pt_ft_self, `nevis pretrain "
    "--learner ft_prev_small` for pt_self_small and pt_ft_self_small, with the same width "
    "option if one was given."
)
"""Why a PT learner cannot use its checkpoint (after the two networks are named)."""

IMPORT_HINT = (
    "`nevis pretrain import --from torchvision-resnet34 FILE --out CKPT --provenance TEXT` converts "
    "weights pretrained elsewhere and records where they come from"
)


def check_provenance(checkpoint: bytes, learner: str, origin: Origin) -> Provenance | None:
    """The checkpoint's provenance, if ``learner`` (expecting ``origin``) may start from it.

    Raises:
        LearnerError: an ``external`` learner given a checkpoint that declares no outside
            provenance (naming ``pt_self`` and ``nevis pretrain import``), or a ``self``
            learner given one that does (naming ``pt``).
    """
    provenance = read_provenance(checkpoint)
    if origin == EXTERNAL and (provenance is None or provenance.origin != EXTERNAL):
        made = f" (it records: {provenance.declared})" if provenance is not None else ""
        raise LearnerError(
            f"{learner} is the paper's PT: it starts from a network pretrained on outside data, and the run's "
            f"checkpoint declares no such provenance{made}. A checkpoint made by `nevis pretrain` (the stream's "
            "own meta-train tasks) runs as the self-pretrained variant pt_self or pt_ft_self (pt_self_small, "
            f"pt_ft_self_small on the small CNN); {IMPORT_HINT}."
        )
    if origin == SELF and provenance is not None and provenance.origin == EXTERNAL:
        raise LearnerError(
            f"{learner} is self-pretraining, and the run's checkpoint declares outside provenance "
            f"({provenance.source}: {provenance.declared}). Run it as pt or pt_ft."
        )
    return provenance


class PtLearner(IndepLearner):
    """PT: every task fine-tunes the pretrained checkpoint, one of declared outside provenance."""

    name = "pt"
    origin: Origin = EXTERNAL

    def _initial_predictor(self, view: TaskView, options: TrialOptions, ctx: TrialContext) -> IndepPredictor:
        fresh = self._new_predictor(view.info, ctx, options)
        checkpoint = view.pretrained()
        check_provenance(checkpoint, self.name, self.origin)
        return transfer_backbone(self.load_predictor(checkpoint, view.info, ctx), fresh, reason=PRETRAINED_MISMATCH)


class PtSelfLearner(PtLearner):
    """PT on a self-pretrained checkpoint (``nevis pretrain``): not the paper's PT."""

    name = "pt_self"
    origin: Origin = SELF


class PtFtLearner(FtDLearner):
    """PT+FT: FT-d whose candidates also include the pretrained checkpoint (order -2, listed
    after the earlier tasks: it loses ties to them)."""

    name = "pt_ft"
    origin: Origin = EXTERNAL

    def _has_candidates(self, view: TaskView) -> bool:
        return True  # the pretrained checkpoint competes even on the first task

    def _load_candidate(self, view: TaskView, order: int, ctx: TrialContext) -> IndepPredictor:
        if order == PRETRAINED:
            return self.load_predictor(view.pretrained(), view.info, ctx)
        return super()._load_candidate(view, order, ctx)

    def _selection_key(self, view: TaskView) -> str:
        past = super()._selection_key(view) if view.past_tasks() else view.info.key
        return f"{past}@{digest(view.pretrained())}"

    def _sources(self, view: TaskView, ctx: TrialContext, fresh: IndepPredictor) -> Iterator[tuple[int, FeatureFn]]:
        # The checkpoint's provenance and network are checked before anything is ranked: one of
        # another network would rank like any candidate and fail only on the tasks where it won.
        check_provenance(view.pretrained(), self.name, self.origin)
        pretrained = self._load_candidate(view, PRETRAINED, ctx)
        check_same_network(pretrained, fresh, reason=PRETRAINED_MISMATCH)
        yield from super()._sources(view, ctx, fresh)
        yield PRETRAINED, self._probe_features(pretrained, ctx)


class PtFtSelfLearner(PtFtLearner):
    """PT+FT on a self-pretrained checkpoint (``nevis pretrain``): not the paper's PT+FT."""

    name = "pt_ft_self"
    origin: Origin = SELF


__all__ = [
    "IMPORT_HINT",
    "PRETRAINED_MISMATCH",
    "PtFtLearner",
    "PtFtSelfLearner",
    "PtLearner",
    "PtSelfLearner",
    "check_provenance",
]
