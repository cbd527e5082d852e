"""A run's transfer report (NEVIS'22 §5.2), read from what is stored; the maths is
:mod:`services.core.transfer`.

Nothing here runs learner code: the errors are committed task results, FT-d's choices are the
learner state committed with the run's latest task (a pickle the learner wrote, so it is read
with an unpickler that builds plain data only and refuses any class), and the source's image
size is the ``original_shape`` the dataset's index recorded when the stream was prepared.
"""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError, ObjectNotFoundError, ObjectTooLargeError
from services.core.transfer import (
    Choice,
    Repeat,
    Slice,
    TaskFact,
    candidate_label,
    choices_from_state,
    matrix,
    repeats,
    resolution_slices,
    same_task_budget,
    source_side,
)
from services.store.db.models import Dataset, Learner, StreamTask, Submission, TaskResult
from services.store.objects import ObjectStore
from services.store.runs.board_query import is_baseline
from services.store.runs.details import INDEP_NAME
from services.store.runs.records import last_state_key
from services.store.runs.summary import RunSummary, load_summary
from services.store.runs.transfer_record import MAX_RECORD_BYTES, decode_record, encode_record, latest_record_key

MAX_STATE_BYTES = 16 * 2**20
"""A larger learner state is not read for choices (FT-d's is a few kB per task)."""
MAX_CHOICES = 256
"""Tasks of the transfer matrix shown (the first ones): the full NEVIS'22 stream has 106."""
NO_INDEP = "no Indep run at this budget"


@dataclass(frozen=True)
class TransferReport:
    """What the submission page and ``nevis results --json`` show of a run's transfer."""

    submission_id: int
    repeats: list[Repeat]
    indep_submission_id: int | None  # the Indep run compared with, same stream version and budget
    indep_reason: str | None  # why there is none
    choices: dict[int, Choice]  # FT-d's record per task: the learner's own word
    choices_reason: str | None  # why there are none
    slices: list[Slice]
    datasets: dict[int, str] = field(default_factory=dict)  # each task's dataset, for labels
    source_sides: dict[int, int | None] = field(default_factory=dict)

    def matrix(self) -> tuple[list[int], list[int], list[list[float | None]]]:
        return matrix(self.choices)

    def to_dict(self) -> dict[str, Any]:
        targets, sources, cells = self.matrix()
        return {
            "repeats": [r.to_dict() for r in self.repeats],
            "indep_submission_id": self.indep_submission_id,
            "indep_reason": self.indep_reason,
            "transfer_matrix": {
                "recorded_by": "the learner (its own record of its choices, not checked by the harness)",
                "targets": targets,
                "sources": sources,
                "source_labels": [candidate_label(s) for s in sources],
                "knn_errors": cells,
                "choices": [self.choices[t].to_dict() for t in targets],
                "reason": self.choices_reason,
            },
            "resolution_slices": [vars(s) for s in self.slices],
            "source_sides": {str(k): v for k, v in sorted(self.source_sides.items())},
        }


def transfer_report(
    session: Session, store: ObjectStore, *, submission_id: int, summary: RunSummary | None = None
) -> TransferReport:
    """The run's repeats, FT-d choices and resolution slices (``summary``: the run's, where the
    caller has read it already); an unknown id is an UnknownNameError (from :func:`load_summary`)."""
    if summary is None or summary.submission_id != submission_id:
        summary = load_summary(session, submission_id=submission_id)
    submission = session.get(Submission, submission_id)
    sides = source_sides(session, store, submission)
    facts = [TaskFact(t.order, t.dataset, t.phase, t.error, sides.get(t.order)) for t in summary.tasks]
    indep_id = indep_at_budget(session, submission)
    theirs = task_errors(session, indep_id) if indep_id is not None else None
    choices, reason = learner_choices(session, store, submission_id, orders=[t.order for t in summary.tasks])
    return TransferReport(
        submission_id=submission_id,
        repeats=repeats(facts, theirs),
        indep_submission_id=indep_id,
        indep_reason=None if indep_id is not None else NO_INDEP,
        choices=choices,
        choices_reason=reason,
        slices=resolution_slices(facts, phase=summary.phase, indep=theirs),
        datasets={t.order: t.dataset for t in summary.tasks},
        source_sides=sides,
    )


def indep_at_budget(session: Session, submission: Submission) -> int | None:
    """The newest finished public Indep run (``indep``, ``indep_small``, ...) on the same stream
    version, phase and image size whose per-task budget (trials, steps) is the submission's."""
    rows = session.execute(
        select(Submission.id, Submission.budget)
        .join(Learner, Learner.id == Submission.learner_id)
        .where(
            Submission.stream_version_id == submission.stream_version_id,
            Submission.phase == submission.phase,
            Submission.image_size == submission.image_size,
            Submission.status == "succeeded",
            Submission.visibility == "public",
            Submission.id != submission.id,
            Learner.entrypoint.startswith(INDEP_NAME),
            is_baseline(Learner.entrypoint),
        )
        .order_by(Submission.id.desc())
    ).all()
    return next(
        (sid for sid, budget in rows if same_task_budget(dict(budget or {}), dict(submission.budget or {}))), None
    )


def task_errors(session: Session, submission_id: int) -> dict[int, float]:
    """Committed error per task order."""
    rows = session.execute(
        select(StreamTask.order, TaskResult.error)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .where(TaskResult.submission_id == submission_id)
    ).all()
    return {order: float(error) for order, error in rows}


def source_sides(session: Session, store: ObjectStore, submission: Submission) -> dict[int, int | None]:
    """Each task's source long side, from its dataset's index (any prepared image size: the
    source is the same); None where none is stored. An index is read once per process and
    content (its digest is in the row), so a page render after a commit reads no objects."""
    rows = session.execute(
        select(StreamTask.order, Dataset.index_key, Dataset.index_sha256)
        .outerjoin(Dataset, Dataset.key == StreamTask.dataset)
        .where(StreamTask.stream_version_id == submission.stream_version_id)
        .order_by(StreamTask.order, (Dataset.image_size != submission.image_size), Dataset.id)
    ).all()
    out: dict[int, int | None] = {}
    for order, key, digest in rows:
        if order in out and out[order] is not None:
            continue  # the submission's own image size came first
        side = _SIDES.get(digest) if digest else None
        if side is None:
            side = _index_side(store, key)
            if side is not None and digest:  # a missing index is looked for again next time
                if len(_SIDES) >= _SIDES_KEPT:
                    _SIDES.clear()
                _SIDES[digest] = side
        out[order] = side
    return out


_SIDES: dict[str, int] = {}
"""Source long side per dataset index digest (an index's content never changes under it)."""
_SIDES_KEPT = 4096


def learner_choices(
    session: Session, store: ObjectStore, submission_id: int, *, orders: Collection[int] | None = None
) -> tuple[dict[int, Choice], str | None]:
    """FT-d's per-task records committed with the run's latest task, or none and why: the
    transfer record kept at its commit (:func:`keep_transfer_record`; at most
    :data:`~services.store.runs.transfer_record.MAX_RECORD_BYTES`, its size checked before it
    is read), never the learner's state. Only a task committed before records were kept has
    its state read here, as it was then: :func:`state_choices`."""
    record = latest_record_key(session, submission_id=submission_id)
    if record is None:
        return {}, "no task committed yet"
    try:
        return decode_record(store.get_bytes(record, max_bytes=MAX_RECORD_BYTES))
    except ObjectNotFoundError:
        return state_choices(session, store, submission_id, orders=orders)  # committed before records were kept
    except ObjectTooLargeError:
        return {}, f"the transfer record is over {MAX_RECORD_BYTES // 2**10} KiB: not read"


def keep_transfer_record(session: Session, store: ObjectStore, *, submission_id: int) -> str | None:
    """Read the choices from the state committed with the run's latest task, once, and keep
    them bounded as that attempt's transfer record (the harness calls it after each commit);
    returns its key (None: no task committed)."""
    record = latest_record_key(session, submission_id=submission_id)
    key = last_state_key(session, submission_id=submission_id)
    if record is None or key is None:
        return None
    orders = [t.order for t in load_summary(session, submission_id=submission_id).tasks]
    choices, reason = state_choices(session, store, submission_id, orders=orders)
    try:
        digest: str | None = store.info(key).sha256
    except ObjectNotFoundError:
        digest = None
    store.put_bytes(record, encode_record(choices, reason, state_sha256=digest))
    return record


def state_choices(
    session: Session, store: ObjectStore, submission_id: int, *, orders: Collection[int] | None = None
) -> tuple[dict[int, Choice], str | None]:
    """FT-d's per-task records in the state committed with the run's latest task, or none and why.

    The state is the learner's own bytes: one over :data:`MAX_STATE_BYTES` is refused before
    it is read, only records of the run's committed tasks (``orders``) count, and what a
    state gave is kept per process by its digest, so a page shown again reads nothing.
    """
    key = last_state_key(session, submission_id=submission_id)
    if key is None:
        return {}, "no task committed yet"
    try:
        digest = store.info(key).sha256
        remembered = _CHOICES.get((digest, _orders_key(orders)))
        if remembered is not None:
            return remembered
        data = store.get_bytes(key, max_bytes=MAX_STATE_BYTES)
    except ObjectNotFoundError:
        return {}, "the learner state is no longer stored"
    except ObjectTooLargeError:
        return {}, f"the learner state is over {MAX_STATE_BYTES // 2**20} MiB: not read for choices"
    found = _choices_in(data, orders)
    if len(_CHOICES) >= _CHOICES_KEPT:
        _CHOICES.clear()
    _CHOICES[(digest, _orders_key(orders))] = found
    return found


_CHOICES: dict[tuple[str, tuple[int, ...] | None], tuple[dict[int, Choice], str | None]] = {}
"""What each state (by digest) gave for a run's committed tasks: a state never changes under its digest."""
_CHOICES_KEPT = 256


def _orders_key(orders: Collection[int] | None) -> tuple[int, ...] | None:
    return None if orders is None else tuple(sorted(orders))


def _choices_in(data: bytes, orders: Collection[int] | None) -> tuple[dict[int, Choice], str | None]:
    try:
        state = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - any state but plain data: not FT-d's record
        return {}, "the learner's state is not a plain record of choices (not FT-d, MT or PT+FT)"
    choices = choices_from_state(state, orders=orders)
    if not choices:
        return {}, "the learner recorded no choices (not FT-d, MT or PT+FT)"
    if len(choices) > MAX_CHOICES:
        kept = sorted(choices)[:MAX_CHOICES]
        return (
            {t: choices[t] for t in kept},
            f"the first {MAX_CHOICES} of the {len(choices)} tasks the learner recorded choices for are shown",
        )
    return choices, None


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, numbers and strings only: a learner's pickle never names a class."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _index_side(store: ObjectStore, key: str | None) -> int | None:
    if key is None:
        return None
    try:
        doc = json.loads(store.get_bytes(key))
    except (ObjectNotFoundError, NevisError, ValueError):
        return None
    source = doc.get("source") if isinstance(doc, dict) else None
    return source_side(source.get("original_shape")) if isinstance(source, dict) else None


__all__ = [
    "MAX_CHOICES",
    "MAX_STATE_BYTES",
    "NO_INDEP",
    "TransferReport",
    "indep_at_budget",
    "keep_transfer_record",
    "learner_choices",
    "source_sides",
    "state_choices",
    "task_errors",
    "transfer_report",
]
