"""Turn a learner's declared search space into a seeded Ray Tune parameter space."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ray import tune

from services.core.errors import LearnerError
from workers.learners.protocol import Choice, LogUniform, SearchDomain, Uniform
from workers.trainer.trial import HARNESS_KEYS, TRIAL_INDEX, TRIAL_SEED


def to_tune_domain(name: str, domain: SearchDomain) -> Any:
    """One declared domain as a Tune sampler; nonsense bounds are the learner's error."""
    if isinstance(domain, LogUniform):
        if not (0 < domain.low < domain.high and math.isfinite(domain.high)):
            raise LearnerError(f"Search space {name!r}: LogUniform needs 0 < low < high; got {domain}.")
        return tune.loguniform(domain.low, domain.high)
    if isinstance(domain, Uniform):
        if not (domain.low <= domain.high and math.isfinite(domain.low) and math.isfinite(domain.high)):
            raise LearnerError(f"Search space {name!r}: Uniform needs finite low <= high; got {domain}.")
        return tune.uniform(domain.low, domain.high)
    if isinstance(domain, Choice):
        if not domain.values:
            raise LearnerError(f"Search space {name!r}: Choice needs at least one value.")
        return tune.choice(list(domain.values))
    raise LearnerError(
        f"Search space {name!r}: expected LogUniform, Uniform or Choice from "
        f"workers.learners.protocol; got {type(domain).__name__}."
    )


def param_space(space: Mapping[str, SearchDomain], *, trials: int) -> dict[str, Any]:
    """The Tune parameter space: the learner's domains plus a trial index and a trial seed."""
    clash = sorted(set(space) & set(HARNESS_KEYS))
    if clash:
        raise LearnerError(f"Search space names {clash} are reserved by the harness.")
    out = {name: to_tune_domain(name, domain) for name, domain in space.items()}
    out[TRIAL_INDEX] = tune.grid_search(list(range(trials)))
    out[TRIAL_SEED] = tune.randint(0, 2**31 - 1)
    return out


__all__ = ["param_space", "to_tune_domain"]
