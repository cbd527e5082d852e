"""Where a trial checkpoints: the default fractions of its steps and the steps they give.

Apart from :mod:`services.core.budget` because learner hosts need these and nothing else of
it: the budget's model imports pydantic (0.1–0.16 s), which every host start paid for one
tuple.
"""

from __future__ import annotations

from collections.abc import Sequence

CHECKPOINT_DEFAULT_FRACTIONS: tuple[float, ...] = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)
"""Where a trial checkpoints by default: untrained, 1/8, 1/4, 1/2, 3/4 and final."""


def checkpoint_steps(total_steps: int, fractions: Sequence[float]) -> tuple[int, ...]:
    """Steps at which to checkpoint: each fraction of ``total_steps``, rounded, deduplicated.

    Fraction 0 is the untrained model (the learner's first ``progress`` call, at step 0).
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1; got {total_steps}")
    bad = [f for f in fractions if not 0.0 <= f <= 1.0]
    if bad:
        raise ValueError(f"checkpoint fractions must lie in [0, 1]; got {bad}")
    return tuple(sorted({int(round(f * total_steps)) for f in fractions}))


__all__ = ["CHECKPOINT_DEFAULT_FRACTIONS", "checkpoint_steps"]
