"""Replaying a task's trial choice under label-free proxies (LiDAR, RankMe) instead of dev error.

Why: LiDAR and RankMe (METRICS.md §3) score a representation without labels. If they rank
trials as dev error does, a search could choose, or stop early, trials without spending dev
labels, and stopping early saves FLOPs. This module answers that from what a run already
stored, with no learner code: each task's trials (final dev error, FLOPs charged, the
proxies probed at their checkpoints) and the committed choice. A policy is:

- ``choose``: how the final trial is chosen among those that ran to the end: ``dev`` (the
  lowest final dev error: what the harness does) or a proxy (the best value at the trial's
  last checkpoint, "best" as the proxy's spec says: :mod:`services.core.metric_specs`);
- ``prune``: None (every trial runs to its end), or a proxy by which trials are stopped at
  the rung steps (the 1/8 and 1/4 checkpoints): ASHA's asynchronous rule, as the live
  ``asha`` scheduler applies it (``workers.trainer.early_stopping``), with trials reporting
  in trial-index order and the better proxy value (by its spec) going on.

A stopped trial is charged ``flops × rung / steps`` (FLOPs taken to accrue in proportion to
steps; its last dev pass is not spent). What a policy reads of the proxies costs FLOPs too
(the probe's feature passes); callers pass them per checkpoint and they are added.

A policy is scored on data selection did not use. Dev selection picks the trial with the
lowest final *dev* error, so scoring the policies on that same dev error is a winner's curse
against the proxies: dev selection wins by construction (its regret there is 0, every other
policy's ≥ 0). Each trial's final checkpoint is therefore also scored on the held-out
``dev_test`` examples of its probe sample (its learner's own predictions there, stored by the
probe pool's checkpoint job: ``heldout_error``), which no selection reads; a policy's
``e_heldout`` and ``regret_heldout`` (against dev selection, either sign) are the unbiased
figures. ``e_dev`` and ``regret`` stay beside them, labelled as the dev error selection itself
optimised. Where a chosen trial has no held-out error (probed before it was recorded), the
held-out figures are None, never the dev ones under another name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.core.metric_specs import PROXIES, metric_spec

ETA = 3  # ASHA's reduction factor (workers.trainer.searchers.ASHA_REDUCTION_FACTOR)
RUNG_FRACTIONS = (0.125, 0.25)  # the default checkpoints at 1/8 and 1/4 of a trial's steps


@dataclass(frozen=True)
class TrialRecord:
    """One trial as stored: final dev error (None unless it ran to its end), FLOPs charged,
    and per proxy, its value at each probed checkpoint step; ``proxy_flops``: what probing
    each checkpoint cost (step → FLOPs); ``heldout_error``: its final checkpoint's error on
    examples selection never read (None: not measured)."""

    trial_index: int
    dev_error: float | None
    flops: float
    proxies: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    proxy_flops: Mapping[int, float] = field(default_factory=dict)
    heldout_error: float | None = None  # its final checkpoint's error on held-out dev_test examples


@dataclass(frozen=True)
class TaskRecord:
    """One committed task: its trials, the committed trial, what the task charged (cFLOP),
    each trial's step budget and the rung steps."""

    order: int
    trials: tuple[TrialRecord, ...]
    chosen_index: int
    flops: float
    steps: int
    rungs: tuple[int, ...]


@dataclass(frozen=True)
class Policy:
    name: str
    choose: str = "dev"  # "dev" or a proxy
    prune: str | None = None  # None or a proxy

    @property
    def proxies(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.prune, self.choose) if p != "dev" and p is not None))


POLICIES = (
    Policy("dev"),
    Policy("choose:lidar", choose="lidar"),
    Policy("choose:rankme", choose="rankme"),
    Policy("prune:lidar", prune="lidar"),
    Policy("prune:rankme", prune="rankme"),
    Policy("prune+choose:lidar", choose="lidar", prune="lidar"),
)
"""The policies replayed by default: dev selection (the reference), choosing by a proxy,
pruning by a proxy (choosing the survivors by dev), and LiDAR alone (no dev label read)."""


class ReplayError(ValueError):
    """A task cannot be replayed under a policy (a proxy value it needs was not probed)."""


@dataclass(frozen=True)
class TaskChoice:
    order: int
    trial_index: int
    dev_error: float
    flops: float  # the task's cFLOP under the policy, the proxy's FLOPs included
    saved: float  # training FLOPs of the pruned trials' remaining steps
    proxy_flops: float  # FLOPs of the proxy passes it read
    stopped: tuple[int, ...] = ()  # trial indices pruned
    heldout_error: float | None = None  # the chosen trial's error on held-out dev_test examples


def rung_steps(steps: int, fractions: Sequence[float] = RUNG_FRACTIONS) -> tuple[int, ...]:
    """The checkpoint steps of ``fractions`` (rounded as checkpoints are), below ``steps``."""
    return tuple(sorted({round(f * steps) for f in fractions} - {0} - {steps}))


def halving(values: Sequence[float], *, eta: int = ETA, higher_is_better: bool = True) -> list[bool]:
    """ASHA's rule at one rung, trials reporting in order: whether each goes on. The first
    ``eta - 1`` always do; from the ``eta``-th on, only within the best ``1/eta`` of the values
    so far (its own included; ``higher_is_better``: the proxy's direction, from its spec). A
    non-finite value counts as the worst."""
    sign = -1.0 if higher_is_better else 1.0
    seen: list[float] = []
    out = []
    for value in values:
        seen.append(sign * value if math.isfinite(value) else math.inf)
        if len(seen) < eta:
            out.append(True)
            continue
        cutoff = sorted(seen)[max(0, math.ceil(len(seen) / eta) - 1)]
        out.append(seen[-1] <= cutoff)
    return out


def _value(trial: TrialRecord, proxy: str, step: int, order: int) -> float:
    value = trial.proxies.get(proxy, {}).get(step)
    if value is None:
        raise ReplayError(
            f"task {order}: trial {trial.trial_index} has no {proxy} at step {step} "
            "(probe every trial's checkpoints: nevis probe run --all-trials)"
        )
    return float(value)


def replay_task(task: TaskRecord, policy: Policy) -> TaskChoice:
    """The trial ``policy`` would have committed for ``task``, and what the task would cost.

    Raises:
        ReplayError: a proxy value the policy needs was not probed, or no trial finished.
    """
    finished = [t for t in task.trials if t.dev_error is not None]
    if not finished:
        raise ReplayError(f"task {task.order}: no trial ran to its end with a dev error")
    if policy.choose == "dev" and policy.prune is None:
        chosen = next((t for t in finished if t.trial_index == task.chosen_index), None)
        if chosen is None:
            raise ReplayError(f"task {task.order}: its committed trial {task.chosen_index} has no dev error")
        return TaskChoice(
            task.order, chosen.trial_index, float(chosen.dev_error), task.flops, 0.0, 0.0, (), chosen.heldout_error
        )
    alive = sorted(finished, key=lambda t: t.trial_index)
    saved = proxy_flops = 0.0
    stopped: list[int] = []
    if policy.prune is not None:
        for rung in task.rungs:
            values = [_value(t, policy.prune, rung, task.order) for t in alive]
            proxy_flops += sum(t.proxy_flops.get(rung, 0.0) for t in alive)
            keep = halving(values, higher_is_better=metric_spec(policy.prune).higher_is_better)
            for trial, go_on in zip(alive, keep, strict=True):
                if not go_on:
                    saved += trial.flops * (1.0 - rung / task.steps)
                    stopped.append(trial.trial_index)
            alive = [t for t, go_on in zip(alive, keep, strict=True) if go_on]
    if policy.choose == "dev":
        chosen = min(alive, key=lambda t: (t.dev_error, t.trial_index))
    else:
        last = {t.trial_index: max(t.proxies.get(policy.choose, {}), default=None) for t in alive}
        scores = {}
        for t in alive:
            step = last[t.trial_index]
            if step is None or step != task.steps:
                raise ReplayError(
                    f"task {task.order}: trial {t.trial_index} has no {policy.choose} at its "
                    f"last step {task.steps} (probe its last checkpoint)"
                )
            scores[t.trial_index] = _value(t, policy.choose, step, task.order)
            proxy_flops += t.proxy_flops.get(step, 0.0)
        sign = 1.0 if metric_spec(policy.choose).higher_is_better else -1.0
        chosen = max(alive, key=lambda t: (sign * scores[t.trial_index], -t.trial_index))
    flops = task.flops - saved + proxy_flops
    return TaskChoice(
        task.order,
        chosen.trial_index,
        float(chosen.dev_error),
        flops,
        saved,
        proxy_flops,
        tuple(stopped),
        chosen.heldout_error,
    )


@dataclass(frozen=True)
class PolicySummary:
    """A policy over the replayed tasks, beside dev selection on the same tasks."""

    policy: str
    tasks: int
    e_dev: float  # mean final dev error of the chosen trials: what dev selection optimised (biased for it)
    regret: float  # Σ over tasks (its dev error − dev selection's): ≥ 0 by construction
    cflop: float  # Σ of the tasks' cFLOP under the policy
    flops_saved: float  # dev selection's cFLOP − this one's (negative: it cost more)
    saved_fraction: float
    proxy_flops: float
    same_choice: int  # tasks where it commits dev selection's trial
    stopped_trials: int
    e_heldout: float | None = None  # mean held-out (dev_test) error of the chosen trials; None: not measured
    regret_heldout: float | None = None  # Σ over tasks (its held-out error − dev selection's), either sign


def _heldout_gaps(
    picked: Sequence[TaskChoice], reference: Mapping[int, TaskChoice]
) -> list[tuple[float, float]] | None:
    """Per task, the chosen trial's held-out error and its gap to dev selection's; None unless
    every one of them (and dev selection's) was measured."""
    out = []
    for choice in picked:
        mine, base = choice.heldout_error, reference[choice.order].heldout_error
        if mine is None or base is None:
            return None
        out.append((mine, mine - base))
    return out


def summarise(
    tasks: Sequence[TaskRecord], policies: Sequence[Policy] = POLICIES
) -> tuple[list[PolicySummary], list[str]]:
    """Every policy over the tasks that all of them can replay, and why any task was left out.

    Raises:
        ReplayError: no task can be replayed under every policy.
    """
    choices: dict[int, dict[str, TaskChoice]] = {}
    skipped = []
    for task in tasks:
        try:
            choices[task.order] = {p.name: replay_task(task, p) for p in policies}
        except ReplayError as exc:
            skipped.append(str(exc))
    if not choices:
        raise ReplayError("no task can be replayed under every policy: " + "; ".join(skipped))
    reference = {order: replay_task(next(t for t in tasks if t.order == order), Policy("dev")) for order in choices}
    base_flops = sum(c.flops for c in reference.values())
    out = []
    for policy in policies:
        picked = [choices[order][policy.name] for order in sorted(choices)]
        cflop = sum(c.flops for c in picked)
        held = _heldout_gaps(picked, reference)
        out.append(
            PolicySummary(
                policy.name,
                len(picked),
                sum(c.dev_error for c in picked) / len(picked),
                sum(c.dev_error - reference[c.order].dev_error for c in picked),
                cflop,
                base_flops - cflop,
                (base_flops - cflop) / base_flops if base_flops else 0.0,
                sum(c.proxy_flops for c in picked),
                sum(c.trial_index == reference[c.order].trial_index for c in picked),
                sum(len(c.stopped) for c in picked),
                None if held is None else sum(e for e, _ in held) / len(held),
                None if held is None else sum(gap for _, gap in held),
            )
        )
    return out, skipped


__all__ = [
    "ETA",
    "POLICIES",
    "PROXIES",
    "RUNG_FRACTIONS",
    "Policy",
    "PolicySummary",
    "ReplayError",
    "TaskChoice",
    "TaskRecord",
    "TrialRecord",
    "halving",
    "replay_task",
    "rung_steps",
    "summarise",
]
