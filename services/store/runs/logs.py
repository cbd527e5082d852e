"""A submission's logs: what its learner hosts wrote, per trial and per prediction job.

The trainer stores each trial's log (its host's output, bounded, and the traceback of a
failure: :mod:`workers.sandbox.log_ring`) at ``<trial prefix>/log.txt``, each attempt's
prediction job's at ``<attempt prefix>/predict-log.txt`` and its ``prepare_task``'s at
``<attempt prefix>/prepare-log.txt`` (:mod:`services.store.key_layout`).
This module lists them from the database's trials and the store's objects and reads them back.
Who may read them (the owner and admins, never other users) is the caller's rule: logs hold
whatever a learner printed.

A meta-test run's prediction jobs see the test images, and a learner could print them (one
printed all 180 of a task's in base64): their logs are withheld from everyone reading them
here, owner and admins alike, and only a failed job's traceback, its last
:data:`WITHHELD_TRACEBACK_BYTES`, is shown (:func:`read_log`), until the operator retires the
stream version (``NEVIS_RETIRED_STREAMS``). The stored object is kept for the operator, who
can read the store directly.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.store import key_layout
from services.store.db.models import StreamTask, StreamVersion, Submission, TaskRun, Trial
from services.store.objects import ObjectStore

WITHHELD_TRACEBACK_BYTES = 2048
"""The most of a withheld prediction log shown: a failure's traceback, its last bytes."""
WITHHELD_NOTE = (
    "[nevis] This prediction job scored the meta-test's test images: its log is withheld "
    "(only a failure's traceback, its last {limit} bytes, is shown), so that nothing the learner "
    "printed carries test images out.\n"
)
_TRACEBACK = "Traceback (most recent call last)"
_PREDICT_KEY = re.compile(
    "^" + re.escape(key_layout.RUNS) + r"/\d+/task-(\d+)/attempt-(\d+)/" + re.escape(key_layout.PREDICT_LOG_FILE) + "$"
)
_PREPARE_KEY = re.compile(
    "^" + re.escape(key_layout.RUNS) + r"/\d+/task-(\d+)/attempt-(\d+)/" + re.escape(key_layout.PREPARE_LOG_FILE) + "$"
)


@dataclass(frozen=True)
class LogEntry:
    """One log: of a trial (``trial`` set) or of an attempt's prediction job (``trial`` None)."""

    task: int  # the task's stream order
    attempt: int
    trial: int | None
    key: str
    size: int | None  # bytes stored; None: no log object (a trial from before logs were kept)
    status: str | None = None  # the trial's status
    error: str | None = None  # the trial's error, as recorded
    traceback: str | None = None  # the trial's recorded traceback (shown when no log was stored)
    withheld: bool = False  # a meta-test prediction job's: only a failure's traceback is shown
    failed: bool = False  # the attempt failed (a prediction job's)
    preparation: bool = False  # the attempt's prepare_task (``trial`` None), before its trials

    @property
    def kind(self) -> str:
        return "preparation" if self.preparation else "prediction" if self.trial is None else "trial"


def list_logs(
    session: Session,
    store: ObjectStore,
    *,
    submission_id: int,
    task: int | None = None,
    trial: int | None = None,
    retired: Collection[tuple[str, str]] = (),
) -> list[LogEntry]:
    """A submission's logs in stream order (each attempt's ``prepare_task``, its trials, then
    its prediction job),
    optionally only one task's or one trial index's; a meta-test run's prediction logs are
    withheld unless its stream version, ``(name, version)``, is among the ``retired``."""
    sizes = {o.key: o.size for o in store.list_objects(key_layout.submission_prefix(submission_id) + "/")}
    query = (
        select(StreamTask.order, TaskRun.attempt, Trial.trial_index, Trial.status, Trial.error_text, Trial.traceback)
        .select_from(Trial)
        .join(TaskRun, TaskRun.id == Trial.task_run_id)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .where(TaskRun.submission_id == submission_id)
    )
    if task is not None:
        query = query.where(StreamTask.order == task)
    if trial is not None:
        query = query.where(Trial.trial_index == trial)
    entries = []
    for order, attempt, index, status, error, trace in session.execute(query).all():
        key = key_layout.trial_log_key(
            key_layout.trial_prefix(key_layout.attempt_prefix(submission_id, order, attempt), index)
        )
        entries.append(LogEntry(order, attempt, index, key, sizes.get(key), status, error, trace))
    if trial is None:
        withheld = _withholds(session, submission_id, retired)
        failed = _failed_attempts(session, submission_id) if withheld else set()
        for key, size in sizes.items():
            prepared = _PREPARE_KEY.match(key)  # never withheld: it sees no evaluation images
            if prepared and (task is None or int(prepared[1]) == task):
                entries.append(LogEntry(int(prepared[1]), int(prepared[2]), None, key, size, preparation=True))
            found = _PREDICT_KEY.match(key)
            if found and (task is None or int(found[1]) == task):
                order, attempt = int(found[1]), int(found[2])
                entries.append(
                    LogEntry(order, attempt, None, key, size, withheld=withheld, failed=(order, attempt) in failed)
                )
    return sorted(entries, key=lambda e: (e.task, e.attempt, not e.preparation, e.trial is None, e.trial or 0))


def _withholds(session: Session, submission_id: int, retired: Collection[tuple[str, str]]) -> bool:
    """Whether the submission's prediction logs are withheld: a meta-test run on a live stream version."""
    row = session.execute(
        select(Submission.phase, StreamVersion.name, StreamVersion.version)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .where(Submission.id == submission_id)
    ).first()
    return row is not None and row[0] == "meta_test" and (row[1], row[2]) not in set(retired)


def _failed_attempts(session: Session, submission_id: int) -> set[tuple[int, int]]:
    """(task order, attempt) of the submission's attempts that ended failed or timed out."""
    rows = session.execute(
        select(StreamTask.order, TaskRun.attempt)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .where(TaskRun.submission_id == submission_id, TaskRun.status.in_(("failed", "timed_out")))
    ).all()
    return {(order, attempt) for order, attempt in rows}


def log_keys(session: Session) -> set[str]:
    """The keys of every log the database's rows name: each trial's, and each attempt's
    ``prepare_task``'s and prediction job's; the store's garbage collection keeps them as long as their rows live."""
    keys: set[str] = set()
    rows = session.execute(
        select(TaskRun.submission_id, StreamTask.order, TaskRun.attempt, Trial.trial_index)
        .select_from(TaskRun)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .outerjoin(Trial, Trial.task_run_id == TaskRun.id)
    )
    for submission_id, order, attempt, index in rows:
        prefix = key_layout.attempt_prefix(submission_id, order, attempt)
        keys.add(key_layout.predict_log_key(prefix))
        keys.add(key_layout.prepare_log_key(prefix))
        if index is not None:
            keys.add(key_layout.trial_log_key(key_layout.trial_prefix(prefix, index)))
    return keys


def read_log(store: ObjectStore, entry: LogEntry, *, tail_bytes: int) -> tuple[str, bool]:
    """The log's text (its last ``tail_bytes``), and whether it was cut; a trial without a
    stored log reads as its recorded error and traceback; a withheld one as a note and, for a
    failed job, the last :data:`WITHHELD_TRACEBACK_BYTES` from its last traceback."""
    if entry.withheld:
        return _withheld(store, entry), False
    if entry.size is None:
        text = "\n".join(part for part in (entry.error, entry.traceback) if part)
        data = text.encode("utf-8")
    else:
        data = store.get_bytes(entry.key)
    cut = len(data) > tail_bytes
    return data[-tail_bytes:].decode("utf-8", "replace"), cut


def _withheld(store: ObjectStore, entry: LogEntry) -> str:
    note = WITHHELD_NOTE.format(limit=WITHHELD_TRACEBACK_BYTES)
    if not entry.failed or entry.size is None:
        return note
    text = store.get_bytes(entry.key).decode("utf-8", "replace")
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return note
    return note + text[start:].encode("utf-8")[-WITHHELD_TRACEBACK_BYTES:].decode("utf-8", "replace")


__all__ = ["WITHHELD_NOTE", "WITHHELD_TRACEBACK_BYTES", "LogEntry", "list_logs", "log_keys", "read_log"]
