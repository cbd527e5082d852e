"""Transfer on a stream, as NEVIS'22 §5.2 looks at it: repeats, FT-d's choices, resolution.

Pure functions of what a run committed (per-task errors), what its learner recorded (FT-d's
choice and k-NN errors per task) and what the stream says of each task (its dataset and the
source's image size); the reads are in :mod:`services.store.runs.transfer`.

- **Repeats.** A dataset that appears more than once in a stream: each later occurrence's
  error against the first occurrence's (what the run learnt the first time should help the
  second: Δ < 0), and against an Indep run's error on that same later task at the same
  per-task budget (Δ < 0: transfer beat training from scratch).
- **Transfer matrix.** For each task, the k-NN error of every candidate start FT-d scored
  (earlier tasks' predictors, a fresh network, a pretrained checkpoint) and the one it chose.
  These are the learner's own record, parsed defensively (:func:`choices_from_state`).
- **Resolution slices.** E over the tasks whose source images have their long side in a
  bucket (the run's, and Indep's on the same tasks where there is one).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

FRESH = -1
"""The candidate that stands for a freshly initialised network (FT-d's ``RANDOM_INIT``)."""
PRETRAINED = -2
"""The candidate that stands for a pretrained checkpoint (PT+FT's)."""
RESOLUTION_BUCKETS: tuple[tuple[float, str], ...] = (
    (32, "≤ 32 px"),
    (64, "33–64 px"),
    (128, "65–128 px"),
    (256, "129–256 px"),
    (math.inf, "> 256 px"),
)
"""Upper bound (inclusive) of the source's long side, and the bucket's label."""
UNKNOWN = "unknown"


@dataclass(frozen=True)
class TaskFact:
    """What the maths needs of one task of a run."""

    order: int
    dataset: str
    phase: str
    error: float | None  # the run's committed error; None: not committed
    source_side: int | None = None  # long side (pixels) of the source's largest image; None: unknown


@dataclass(frozen=True)
class Repeat:
    """A later occurrence of a dataset against its first occurrence and against Indep."""

    dataset: str
    first: int  # the first occurrence's order
    later: int  # this occurrence's order
    first_error: float | None
    later_error: float | None
    indep_error: float | None  # Indep's error on the later task at the same budget

    @property
    def vs_first(self) -> float | None:
        """Later minus first error (< 0: the second time went better)."""
        return _diff(self.later_error, self.first_error)

    @property
    def vs_indep(self) -> float | None:
        """Later error minus Indep's on that task (< 0: transfer beat training from scratch)."""
        return _diff(self.later_error, self.indep_error)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "vs_first": self.vs_first, "vs_indep": self.vs_indep}


@dataclass(frozen=True)
class Choice:
    """One task's selection as the learner recorded it (its own word, never checked here)."""

    task: int
    chosen: int  # an earlier task's order, FRESH or PRETRAINED
    knn_errors: dict[int, float]  # every candidate's k-NN error
    fresh_error: float | None  # the fresh network's, scored beside the candidates
    fresh_would_win: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "chosen": self.chosen,
            "chosen_label": candidate_label(self.chosen),
            "knn_errors": {str(k): v for k, v in sorted(self.knn_errors.items())},
            "fresh_error": self.fresh_error,
            "fresh_would_win": self.fresh_would_win,
        }


@dataclass(frozen=True)
class Slice:
    """E of the tasks whose source resolution falls in one bucket."""

    bucket: str
    tasks: int  # committed tasks of the run in the bucket
    mean_error: float | None
    indep_mean_error: float | None  # Indep's E over the same tasks; None: no Indep run or not all scored


def repeats(tasks: Sequence[TaskFact], indep: Mapping[int, float | None] | None = None) -> list[Repeat]:
    """Every later occurrence of a dataset against its first, in stream order.

    Examples:
        >>> facts = [TaskFact(1, "a", "meta_train", 0.5), TaskFact(2, "b", "meta_train", 0.3),
        ...          TaskFact(3, "a", "meta_test", 0.2)]
        >>> r = repeats(facts, {3: 0.25})[0]
        >>> (r.first, r.later, round(r.vs_first, 2), round(r.vs_indep, 2))
        (1, 3, -0.3, -0.05)
    """
    first: dict[str, TaskFact] = {}
    out = []
    for task in sorted(tasks, key=lambda t: t.order):
        earlier = first.setdefault(task.dataset, task)
        if earlier is not task:
            out.append(
                Repeat(
                    task.dataset,
                    earlier.order,
                    task.order,
                    earlier.error,
                    task.error,
                    None if indep is None else indep.get(task.order),
                )
            )
    return out


def choices_from_state(state: Any, *, orders: Collection[int] | None = None) -> dict[int, Choice]:
    """FT-d's (MT's, PT+FT's) per-task records in a learner state, keyed by task order.

    The state is ``{order: {"chosen": int, "knn_error": {candidate: error}, "fresh_error":
    float, "fresh_would_win": bool}}`` (:meth:`workers.learners.finetune.Selection.record`);
    anything else (another learner's state, a record of the wrong shape) is no record, and an
    entry that does not parse is left out rather than guessed at. With ``orders`` (the tasks
    the run committed), only records of those tasks whose candidates are earlier ones among
    them (or the fresh network, the pretrained checkpoint) count: a learner cannot make the
    report, and the page that shows it, larger than its stream.
    """
    if not isinstance(state, Mapping):
        return {}
    allowed = None if orders is None else frozenset(orders)
    out = {}
    for order, record in state.items():
        if allowed is not None and order not in allowed:
            continue
        choice = _choice(order, record, allowed)
        if choice is not None:
            out[choice.task] = choice
    return out


def matrix(choices: Mapping[int, Choice]) -> tuple[list[int], list[int], list[list[float | None]]]:
    """(targets, sources, cells): ``cells[i][j]`` is the k-NN error of source ``j`` on target
    ``i`` (None where it was no candidate). Sources are earlier tasks in order, then the
    pretrained checkpoint and the fresh network where either was scored; the fresh network's
    error counts where it was scored apart from the candidates too.

    Examples:
        >>> c = {2: Choice(2, 1, {1: 0.4}, 0.6, False), 3: Choice(3, 1, {1: 0.1, 2: 0.3}, 0.5, False)}
        >>> matrix(c)
        ([2, 3], [1, 2, -1], [[0.4, None, 0.6], [0.1, 0.3, 0.5]])
    """
    targets = sorted(choices)
    keys = {k for c in choices.values() for k in c.knn_errors}
    if any(c.fresh_error is not None for c in choices.values()):
        keys.add(FRESH)
    sources = sorted(k for k in keys if k >= 0) + [k for k in (PRETRAINED, FRESH) if k in keys]
    cells = [[_cell(choices[t], s) for s in sources] for t in targets]
    return targets, sources, cells


def resolution_slices(
    tasks: Iterable[TaskFact], *, phase: str, indep: Mapping[int, float | None] | None = None
) -> list[Slice]:
    """E per source-resolution bucket over the run's committed tasks of ``phase`` (the
    headline tasks), in bucket order, ``unknown`` last; empty buckets are left out.

    Examples:
        >>> facts = [TaskFact(1, "a", "meta_test", 0.2, 28), TaskFact(2, "b", "meta_test", 0.4, 32),
        ...          TaskFact(3, "c", "meta_test", 0.6, 300)]
        >>> [(s.bucket, s.tasks, round(s.mean_error, 2)) for s in resolution_slices(facts, phase="meta_test")]
        [('≤ 32 px', 2, 0.3), ('> 256 px', 1, 0.6)]
    """
    groups: dict[str, list[TaskFact]] = {}
    for task in tasks:
        if task.phase == phase and task.error is not None:
            groups.setdefault(resolution_bucket(task.source_side), []).append(task)
    labels = [label for _, label in RESOLUTION_BUCKETS] + [UNKNOWN]
    out = []
    for label in (lbl for lbl in labels if lbl in groups):
        group = groups[label]
        theirs = [None if indep is None else indep.get(t.order) for t in group]
        out.append(
            Slice(
                label,
                len(group),
                _mean([t.error for t in group]),
                None if any(e is None for e in theirs) else _mean(theirs),
            )
        )
    return out


def resolution_bucket(side: int | None) -> str:
    """The bucket of a source whose largest image's long side is ``side`` pixels."""
    if side is None:
        return UNKNOWN
    return next(label for bound, label in RESOLUTION_BUCKETS if side <= bound)


def source_side(shape: Any) -> int | None:
    """The long side of a source's images from a dataset index's ``original_shape``: ``[H, W,
    C]`` for one shape, or ``{"min": [...], "max": [...]}`` (the largest image's); None when
    it says nothing usable."""
    if isinstance(shape, Mapping):
        shape = shape.get("max")
    if isinstance(shape, list | tuple) and len(shape) >= 2 and all(_count(v) for v in shape[:2]):
        return int(max(shape[0], shape[1]))
    return None


def same_task_budget(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two runs' budgets give each task the same compute: trials and steps per trial
    (the seed, concurrency, search and caps may differ).

    Examples:
        >>> same_task_budget({"trials": 4, "steps": 200, "seed": 1}, {"trials": 4, "steps": 200, "seed": 2})
        True
        >>> same_task_budget({"trials": 4, "steps": 200}, {"trials": 2, "steps": 200})
        False
    """
    return all(a.get(k) is not None and a.get(k) == b.get(k) for k in ("trials", "steps"))


def candidate_label(order: int) -> str:
    """How a candidate start is named: "task 3", "fresh network" or "pretrained"."""
    return {FRESH: "fresh network", PRETRAINED: "pretrained"}.get(order, f"task {order}")


def _choice(order: Any, record: Any, allowed: frozenset[int] | None = None) -> Choice | None:
    if not (_order(order) and isinstance(record, Mapping)):
        return None
    chosen, errors = record.get("chosen"), record.get("knn_error")
    if not (isinstance(chosen, int) and not isinstance(chosen, bool) and isinstance(errors, Mapping)):
        return None
    if allowed is not None and (
        len(errors) > len(allowed) + 2
        or not all(k in (FRESH, PRETRAINED) or (k in allowed and k < order) for k in errors)
    ):
        return None  # a candidate the run never had
    knn = {k: float(v) for k, v in errors.items() if isinstance(k, int) and _error(v)}
    if len(knn) != len(errors) or (chosen not in knn and chosen != FRESH):
        return None
    fresh, wins = record.get("fresh_error"), record.get("fresh_would_win")
    return Choice(order, chosen, knn, float(fresh) if _error(fresh) else None, wins if isinstance(wins, bool) else None)


def _cell(choice: Choice, source: int) -> float | None:
    if source == FRESH and source not in choice.knn_errors:
        return choice.fresh_error
    return choice.knn_errors.get(source)


def _order(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _error(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


__all__ = [
    "FRESH",
    "PRETRAINED",
    "RESOLUTION_BUCKETS",
    "UNKNOWN",
    "Choice",
    "Repeat",
    "Slice",
    "TaskFact",
    "candidate_label",
    "choices_from_state",
    "matrix",
    "repeats",
    "resolution_bucket",
    "resolution_slices",
    "same_task_budget",
    "source_side",
]
