"""Which runs are seeds of one another: the same learner, budget, image size and options.

Why: a spread "over seeds" is only that when nothing but the seed differs. Runs of one learner
with 4×200 and 16×50,000 budgets, or at 32 and 64 px, answer different questions; pooling them
reads a configuration change as seed noise. The options digest covers every other budget field
(search, scheduler, checkpoints, caps, concurrency): a short SHA-256 of their canonical JSON,
after the current defaults are filled in, so a run stored before a field existed groups with
one that states its default.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from services.core.budget import RunBudget

NOT_OPTIONS = ("seed", "trials", "steps")  # the seed varies within a group; trials × steps is the budget


class SeedGroup(NamedTuple):
    """The key runs share when they are seeds of one configuration."""

    learner: str
    budget: str  # "TRIALSxSTEPS"
    image_size: int
    options: str  # options_digest of the other budget fields

    def label(self) -> str:
        return f"{self.learner} · {self.budget} · {self.image_size} px · options {self.options}"


def options_digest(budget: Mapping[str, Any]) -> str:
    """12 hex digits naming a budget's fields other than the seed, trials and steps.

    Examples:
        >>> options_digest({"trials": 4, "steps": 200, "seed": 1}) == options_digest({"seed": 2})
        True
        >>> options_digest({"scheduler": "asha"}) == options_digest({})
        False
    """
    doc = {k: v for k, v in _filled(budget).items() if k not in NOT_OPTIONS}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def seed_group(learner: str, budget: Mapping[str, Any], image_size: int) -> SeedGroup:
    """The seed group of a run (its learner's name, its stored budget and image size)."""
    stated = {k: v for k, v in budget.items() if k != "seed"}  # the seed never moves the group
    return _group(learner, json.dumps(stated, sort_keys=True, default=str), int(image_size))


@functools.lru_cache(maxsize=4096)
def _group(learner: str, budget: str, image_size: int) -> SeedGroup:
    """Remembered: a board groups the same few configurations on every render, and filling a
    budget's defaults (a validation) costs more than the rest of the grouping."""
    filled = _filled(json.loads(budget))
    return SeedGroup(
        learner=learner,
        budget=f"{filled.get('trials')}x{filled.get('steps')}",
        image_size=image_size,
        options=options_digest(filled),
    )


def _filled(budget: Mapping[str, Any]) -> dict[str, Any]:
    """The budget with today's defaults for the fields it does not state (as stored: a JSON document)."""
    try:
        return RunBudget(**dict(budget)).to_dict()
    except Exception:  # noqa: BLE001 - a budget stored under older rules: group by what it states
        return {**RunBudget().to_dict(), **dict(budget)}


__all__ = ["NOT_OPTIONS", "SeedGroup", "options_digest", "seed_group"]
