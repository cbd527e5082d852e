"""Make a pretrained checkpoint from a stream's meta-train data, for PT and PT+FT.

NEVIS'22's PT baselines start from a model pretrained elsewhere. Pretrained weights cannot
be downloaded on every machine, and tests need one too, so ``nevis pretrain`` makes one
here with an ordinary run: FT-prev (or another learner) over the stream's meta-train phase
only, through the same harness, sandbox and FLOP accounting as any run, recorded in the
database like one. The checkpoint is the predictor the run kept for its last meta-train
task, which ``nevis run --pretrained`` accepts for ``pt`` and ``pt_ft`` (their heads are
replaced; only the backbone transfers). Its network is the pretraining learner's:
``ft_prev`` (the default) trains the ResNet-34 that ``pt`` and ``pt_ft`` use, ``ft_prev_small``
the small CNN of ``pt_small`` and ``pt_ft_small``; a PT learner given a checkpoint of another
network stops with an error naming both. The meta-test tasks are never read. The FLOPs of
pretraining are the pretraining run's; a PT run is not charged them, as in the paper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.core.budget import RunBudget
from services.core.errors import NevisError
from services.store.runs import run_keys
from services.store.runs.summary import load_summary
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

PRETRAIN_LEARNER = "ft_prev"
"""FT-prev on the ResNet-34, the network of ``pt`` and ``pt_ft`` (``ft_prev_small`` for the ``_small`` ones)."""


@dataclass(frozen=True)
class PretrainResult:
    """The checkpoint and the run that made it."""

    checkpoint: bytes
    submission_id: int
    tasks: int
    flops: float


def pretrain(runner: StreamRunner, *, stream: str, steps: int, seed: int = 0, learner: str = PRETRAIN_LEARNER,
             trials: int = 1, on_created: Callable[[int], None] | None = None) -> PretrainResult:
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
    return PretrainResult(checkpoint=runner.store.get_bytes(keys[max(keys)]), submission_id=submission_id,
                          tasks=len(keys), flops=float(summary.cflop))


__all__ = ["PRETRAIN_LEARNER", "PretrainResult", "pretrain"]
