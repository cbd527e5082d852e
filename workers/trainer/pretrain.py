"""Make a self-pretrained checkpoint from a stream's meta-train data, for ``pt_self`` and ``pt_ft_self``.

NEVIS'22's PT baselines start from a model pretrained on outside data (``pt`` / ``pt_ft`` take
such a checkpoint through ``nevis pretrain import``). Pretrained weights cannot be downloaded
on every machine, and tests need one too, so ``nevis pretrain`` makes one here with an
ordinary run: FT-prev (or another learner) over the stream's meta-train phase only, through
the same harness, sandbox and FLOP accounting as any run, recorded in the database like one.
That is self-pretraining, not the paper's PT, and the checkpoint says so: it is the predictor
the run kept for its last meta-train task, stamped with a ``self`` provenance naming the run
and its cFLOP (:mod:`workers.learners.provenance`), which ``pt_self`` and ``pt_ft_self``
accept and ``pt`` / ``pt_ft`` refuse (the heads are replaced; only the backbone transfers).
Its network is the pretraining learner's: ``ft_prev`` (the default) trains the ResNet-34 of
``pt_self`` and ``pt_ft_self``, ``ft_prev_small`` the small CNN of their ``_small`` names; a PT
learner given a checkpoint of another network stops with an error naming both. The meta-test
tasks are never read. The FLOPs of pretraining are the pretraining run's; a PT run is not
charged them, as in the paper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.core.budget import RunBudget
from services.core.errors import NevisError
from services.store.runs import run_keys
from services.store.runs.summary import load_summary
from workers.learners.provenance import SELF, Provenance, stamp
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

PRETRAIN_LEARNER = "ft_prev"
"""FT-prev on the ResNet-34, the network of ``pt_self`` and ``pt_ft_self`` (``ft_prev_small`` for the ``_small`` ones)."""


@dataclass(frozen=True)
class PretrainResult:
    """The checkpoint (stamped with its ``self`` provenance) and the run that made it."""

    checkpoint: bytes
    submission_id: int
    tasks: int
    flops: float


def pretrain(
    runner: StreamRunner,
    *,
    stream: str,
    steps: int,
    seed: int = 0,
    learner: str = PRETRAIN_LEARNER,
    trials: int = 1,
    on_created: Callable[[int], None] | None = None,
) -> PretrainResult:
    """Run ``learner`` over the meta-train phase of ``stream``; its last predictor is the checkpoint.

    Raises:
        NevisError: the stream has no meta-train task, or the run did not finish.
    """
    budget = RunBudget(trials=trials, steps=steps, seed=seed, checkpoint_fractions=(1.0,))
    submission_id = runner.create(RunRequest(stream=stream, learner=learner, phase="meta_train", budget=budget))
    if on_created is not None:
        on_created(submission_id)
    runner.run(submission_id)
    with runner.sessions() as session:
        keys = run_keys.committed_predictor_keys(session, submission_id=submission_id)
        summary = load_summary(session, submission_id=submission_id)
    if not keys:
        raise NevisError(f"Pretraining run {submission_id} committed no task; nothing to save.")
    flops = float(summary.cflop)
    provenance = Provenance(
        SELF,
        f"nevis pretrain: {learner} over the {len(keys)} meta-train tasks of stream {stream!r} (run {submission_id})",
        "nevis pretrain",
        submission_id=submission_id,
        cflop=flops,
    )
    return PretrainResult(
        checkpoint=stamp(runner.store.get_bytes(keys[max(keys)]), provenance),
        submission_id=submission_id,
        tasks=len(keys),
        flops=flops,
    )


__all__ = ["PRETRAIN_LEARNER", "PretrainResult", "pretrain"]
