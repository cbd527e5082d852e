"""The recipe's choices a trial of the network learners (Indep, FT-d, BHPO, PT) may make,
read from its config and checked before any training starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.core.errors import LearnerError
from workers.learners import recipe
from workers.learners.augment import AugmentConfig


@dataclass(frozen=True)
class TrialOptions:
    """The recipe's choices a trial may make, read from its config (BHPO searches them all).

    Config keys, each optional (the default is the paper's fixed recipe): ``architecture``
    (a model name), ``schedule`` ("cosine" or "piecewise"), ``batch_size`` (None: the
    batch-size rule), ``random_crop`` and ``flip`` (training augmentation on or off).
    """

    architecture: str
    schedule: str = "cosine"
    batch_size: int | None = None
    random_crop: bool = True
    flip: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], default_architecture: str) -> TrialOptions:
        batch = config.get("batch_size")
        if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
            raise LearnerError(f"The 'batch_size' hyper-parameter must be a positive int; got {batch!r}.")
        schedule = str(config.get("schedule", "cosine"))
        if schedule not in recipe.SCHEDULES:
            raise LearnerError(f"Unknown 'schedule' {schedule!r}; known: {', '.join(recipe.SCHEDULES)}.")
        return cls(
            architecture=str(config.get("architecture", default_architecture)),
            schedule=schedule,
            batch_size=batch,
            random_crop=bool(config.get("random_crop", True)),
            flip=bool(config.get("flip", True)),
        )

    def augment(self, size: int) -> AugmentConfig:
        """The training augmentation: the paper's crop and flip, or either switched off."""
        base = AugmentConfig(size=size)
        crop = {} if self.random_crop else {"scale": (1.0, 1.0), "ratio": (1.0, 1.0)}
        return AugmentConfig(size=size, flip_p=base.flip_p if self.flip else 0.0, **crop)


__all__ = ["TrialOptions"]
