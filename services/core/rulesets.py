"""Rulesets a submission competes under, declared once: ``open``, ``budget-<X>``, ``self-tuning``.

A ruleset says what the harness enforces on a run, where learner code cannot reach it
(docs/rules.md says each rule and why):

- ``open``: today's rules. Any search; every trial is charged.
- ``budget-<X>`` (``budget-<X>-total-<Y>``): a hard cap of X cFLOP per task. The task harness
  stops trials once the task's running charge (meter or floor, whichever is higher) reaches X
  and commits the best trial finished within it; with ``-total-<Y>`` the whole run also stops
  once its committed tasks spent Y cFLOP (the budget's ``flop_cap``). X and Y are numbers such
  as ``1e12`` or ``2.5T`` (k, M, G, T, P, E).
- ``self-tuning``: one trial per task with the learner's default config (its declared search
  space is collapsed to nothing); any tuning the learner does inside its trial is charged.

The API, the CLI and the runner all read :func:`ruleset`; the names are one :class:`Registry`
(``budget`` is a family: the registry holds its factory, the name carries its numbers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from services.core.budget import RunBudget
from services.core.errors import BudgetError, UnknownNameError
from services.core.registry import Registry

DEFAULT_RULESET = "open"
BUDGET_PREFIX = "budget-"
NAME_MAX = 48
"""The longest ruleset name stored on a submission."""

_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_NUMBER = r"(\d+(?:\.\d+)?(?:[eE][+]?\d+)?)([kMGTPE]?)"
_BUDGET = re.compile(rf"^budget-{_NUMBER}(?:-total-{_NUMBER})?$")


@dataclass(frozen=True)
class TaskRules:
    """What the task harness enforces in every task of a run (shipped to trials)."""

    ruleset: str = DEFAULT_RULESET
    task_flop_cap: float | None = None  # stop trials once the task's charge reaches this
    defaults_only: bool = False  # trials get the learner's default config: no search space

    @property
    def enforced(self) -> bool:
        return self.task_flop_cap is not None or self.defaults_only


@dataclass(frozen=True)
class Ruleset:
    """One ruleset: its name, what it caps and how a submitted budget must look under it."""

    name: str
    summary: str
    task_flop_cap: float | None = None
    stream_flop_cap: float | None = None
    one_trial: bool = False

    @property
    def task_rules(self) -> TaskRules:
        return TaskRules(ruleset=self.name, task_flop_cap=self.task_flop_cap, defaults_only=self.one_trial)

    def apply(self, budget: RunBudget) -> tuple[RunBudget, str | None]:
        """``budget`` as this ruleset runs it, and a note of what was changed (None: nothing).

        ``self-tuning`` collapses a default search (4 trials) to one trial; an asked-for search
        (``trials`` > 1 set explicitly) is refused. ``budget-X-total-Y`` sets the run's
        ``flop_cap`` to Y; a lower cap of the submitter's own is kept.

        Raises:
            BudgetError: the budget asks for what this ruleset does not allow (names the field).
        """
        changes: dict[str, object] = {}
        notes = []
        if self.one_trial and budget.trials != 1:
            if "trials" in budget.model_fields_set:
                raise BudgetError(
                    f"The 'trials' of a budget must be 1 under ruleset {self.name!r} (one trial per "
                    f"task, the learner's default config). Got {budget.trials} instead.",
                    field="trials",
                )
            changes["trials"] = 1
            notes.append(f"search collapsed from {budget.trials} trials to 1 with the learner's defaults")
        elif self.one_trial:
            notes.append("one trial with the learner's defaults")
        if self.stream_flop_cap is not None and (budget.flop_cap is None or budget.flop_cap > self.stream_flop_cap):
            changes["flop_cap"] = self.stream_flop_cap
            notes.append(f"run cap set to {self.stream_flop_cap:.4g} cFLOP")
        if not changes:
            return budget, "; ".join(notes) or None
        kept = {k: v for k, v in budget.to_dict().items() if k in budget.model_fields_set}
        return RunBudget(**{**kept, **changes}), "; ".join(notes)


RULESETS: Registry[Callable[[str], Ruleset]] = Registry("ruleset")
"""Ruleset name (``budget`` for the ``budget-<X>`` family) → factory of its :class:`Ruleset`."""


def _open(name: str) -> Ruleset:
    return Ruleset(name=name, summary="any search; every trial charged")


def _self_tuning(name: str) -> Ruleset:
    return Ruleset(name=name, summary="one trial per task, the learner's default config", one_trial=True)


def _budget(name: str) -> Ruleset:
    match = _BUDGET.match(name)
    if match is None:
        raise UnknownNameError(
            f"The ruleset {name!r} is not a budget tier: write budget-<X> or budget-<X>-total-<Y> "
            "with X, Y cFLOP such as 1e12 or 2.5T (suffixes k, M, G, T, P, E)."
        )
    cap = _number(match.group(1), match.group(2), name)
    total = _number(match.group(3), match.group(4), name) if match.group(3) else None
    summary = f"at most {cap:.4g} cFLOP per task" + (f", {total:.4g} per run" if total else "")
    return Ruleset(name=name, summary=summary, task_flop_cap=cap, stream_flop_cap=total)


def _number(digits: str, suffix: str, name: str) -> float:
    value = float(digits) * _SUFFIX[suffix]
    if not math.isfinite(value) or value <= 0:
        raise UnknownNameError(f"The ruleset {name!r} needs a positive, finite cFLOP cap. Got {digits}{suffix}.")
    return value


RULESETS.register("open", _open)
RULESETS.register("self-tuning", _self_tuning)
RULESETS.register("budget", _budget)


def ruleset(name: str) -> Ruleset:
    """The ruleset called ``name`` (``budget-<X>`` parsed by the ``budget`` entry).

    Raises:
        UnknownNameError: not a ruleset; the message lists the known ones.
    """
    if not isinstance(name, str) or len(name) > NAME_MAX:
        raise UnknownNameError(f"A ruleset name is a string of at most {NAME_MAX} characters. Got {name!r}.")
    if name.startswith(BUDGET_PREFIX):
        return RULESETS.get("budget")(name)
    if name == "budget":
        raise UnknownNameError("The ruleset 'budget' needs its cap: write budget-<X>, e.g. budget-1e12.")
    return RULESETS.get(name)(name)


CAP_STOPPED = "stopped by the harness: "
CAP_NOT_STARTED = "not started: "


def cap_message(ruleset: str, cap: float, spent: int, *, started: bool) -> str:
    """Why the harness stopped a trial at its task's cap (as the trial's row shows it)."""
    return (
        f"{CAP_STOPPED if started else CAP_NOT_STARTED}the task's {ruleset} cap of {cap:.4g} cFLOP is "
        f"reached ({spent:.4g} cFLOP spent by its trials)"
    )


def stopped_at_cap(status: str, error: str | None) -> bool:
    """Whether a trial's row says the harness stopped it (or did not start it) at the task's cap."""
    return status == "stopped" and (error or "").startswith((CAP_STOPPED, CAP_NOT_STARTED))


def known_rulesets() -> tuple[str, ...]:
    """The names a user may write (``budget-<X>`` for the budget family), for help texts."""
    return tuple(f"{BUDGET_PREFIX}<X>" if n == "budget" else n for n in RULESETS.names())


__all__ = [
    "BUDGET_PREFIX",
    "CAP_NOT_STARTED",
    "CAP_STOPPED",
    "DEFAULT_RULESET",
    "NAME_MAX",
    "RULESETS",
    "Ruleset",
    "TaskRules",
    "cap_message",
    "known_rulesets",
    "ruleset",
    "stopped_at_cap",
]
