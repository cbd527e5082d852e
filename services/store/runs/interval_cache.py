"""E's bootstrap interval kept beside a run's predictions, so it is computed once per set of
committed attempts and every later reader (a leaderboard of many runs) only reads a few bytes.

The key holds a digest of what the interval depends on: the committed attempt of each task,
the number of resamples, the seed and the predictions' format. A run that commits another task
(or retries one) has another digest; the old object is an orphan that ``nevis store gc``
removes like any other (the current one is kept: :func:`kept_interval_keys`), and a removed one
is simply computed again.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.core.predictions import FORMAT_VERSION
from services.core.uncertainty import RESAMPLES, SEED, ErrorInterval, Interval
from services.store import key_layout
from services.store.db.models import StreamTask, Submission, TaskResult, TaskRun
from services.store.objects import ObjectStore

CACHE_VERSION = 2  # 2: the default interval keeps the tasks; the task-resampled one is "generalisation"


def interval_key(submission_id: int, attempts: Sequence[tuple[int, int]], *, resamples: int, seed: int) -> str:
    """The key of the interval of ``submission_id`` over ``attempts`` ((order, attempt) pairs)."""
    what = json.dumps([CACHE_VERSION, FORMAT_VERSION, resamples, seed, [list(a) for a in attempts]])
    return key_layout.interval_key(submission_id, hashlib.sha256(what.encode()).hexdigest()[:24])


def load_interval(store: ObjectStore, key: str) -> ErrorInterval | None:
    """The interval kept at ``key``; None when there is none (or it cannot be read)."""
    try:
        return _load(store.get_bytes(key))
    except (NevisError, ValueError, KeyError, TypeError):
        return None


def keep_interval(store: ObjectStore, key: str, result: ErrorInterval) -> None:
    store.put_bytes(key, _dump(result))


def kept_interval_keys(session: Session) -> Iterable[str]:
    """The key of each submission's interval over its current committed attempts (what garbage
    collection keeps; a kept interval of attempts since superseded is an orphan)."""
    attempts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for submission_id, order, attempt in session.execute(
        select(TaskResult.submission_id, StreamTask.order, TaskRun.attempt)
        .join(Submission, Submission.id == TaskResult.submission_id)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .where(StreamTask.phase == Submission.phase)
        .order_by(TaskResult.submission_id, StreamTask.order)
    ):
        attempts[submission_id].append((order, attempt))
    return [interval_key(i, pairs, resamples=RESAMPLES, seed=SEED) for i, pairs in attempts.items()]


def as_document(result: ErrorInterval) -> dict:
    """The interval as a JSON document (what the store keeps, and a leaderboard's summary row)."""
    return {
        "estimate": result.estimate,
        "interval": [result.interval.low, result.interval.high, result.interval.level],
        "standard_error": result.standard_error,
        "task_errors": list(result.task_errors),
        "task_intervals": [[i.low, i.high, i.level] for i in result.task_intervals],
        "resamples": result.resamples,
        "seed": result.seed,
        "version": CACHE_VERSION,
        "generalisation": None
        if result.generalisation is None
        else [result.generalisation.low, result.generalisation.high, result.generalisation.level],
        "generalisation_standard_error": result.generalisation_standard_error,
    }


def is_current(doc: dict) -> bool:
    """The document was kept by this version's method (an older one's interval answered another
    question: it resampled the tasks)."""
    return doc.get("version") == CACHE_VERSION


def from_document(doc: dict) -> ErrorInterval:
    """The interval of an :func:`as_document` document.

    Raises:
        ValueError: the document was kept by an older method (:func:`is_current`).
    """
    if not is_current(doc):
        raise ValueError(f"An interval document of version {doc.get('version', 1)} is not {CACHE_VERSION}.")
    general = doc["generalisation"]
    return ErrorInterval(
        estimate=float(doc["estimate"]),
        interval=Interval(*map(float, doc["interval"])),
        standard_error=float(doc["standard_error"]),
        task_errors=tuple(map(float, doc["task_errors"])),
        task_intervals=tuple(Interval(*map(float, i)) for i in doc["task_intervals"]),
        resamples=int(doc["resamples"]),
        seed=int(doc["seed"]),
        generalisation=None if general is None else Interval(*map(float, general)),
        generalisation_standard_error=doc.get("generalisation_standard_error"),
    )


def _dump(result: ErrorInterval) -> bytes:
    return json.dumps(as_document(result)).encode()


def _load(data: bytes) -> ErrorInterval:
    return from_document(json.loads(data))


__all__ = [
    "CACHE_VERSION",
    "as_document",
    "from_document",
    "interval_key",
    "is_current",
    "keep_interval",
    "kept_interval_keys",
    "load_interval",
]
