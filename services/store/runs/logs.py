"""A submission's logs: what its learner hosts wrote, per trial and per prediction job.

The trainer stores each trial's log (its host's output, bounded, and the traceback of a
failure: :mod:`workers.sandbox.log_ring`) at ``<trial prefix>/log.txt`` and each attempt's
prediction job's at ``<attempt prefix>/predict-log.txt`` (:mod:`services.store.runs.run_keys`).
This module lists them from the database's trials and the store's objects and reads them back.
Who may read them (the owner and admins, never other users) is the caller's rule: logs hold
whatever a learner printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.store.db.models import StreamTask, TaskRun, Trial
from services.store.objects import ObjectStore
from services.store.runs import run_keys

_PREDICT_KEY = re.compile(r"^runs/\d+/task-(\d+)/attempt-(\d+)/" + re.escape(run_keys.PREDICT_LOG_FILE) + "$")


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

    @property
    def kind(self) -> str:
        return "prediction" if self.trial is None else "trial"


def list_logs(session: Session, store: ObjectStore, *, submission_id: int, task: int | None = None,
              trial: int | None = None) -> list[LogEntry]:
    """A submission's logs in stream order (each attempt's trials, then its prediction job),
    optionally only one task's or one trial index's."""
    sizes = {o.key: o.size for o in store.list_objects(f"runs/{submission_id}/")}
    query = (select(StreamTask.order, TaskRun.attempt, Trial.trial_index, Trial.status, Trial.error_text,
                    Trial.traceback)
             .select_from(Trial).join(TaskRun, TaskRun.id == Trial.task_run_id)
             .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
             .where(TaskRun.submission_id == submission_id))
    if task is not None:
        query = query.where(StreamTask.order == task)
    if trial is not None:
        query = query.where(Trial.trial_index == trial)
    entries = []
    for order, attempt, index, status, error, trace in session.execute(query).all():
        key = f"{run_keys.trial_prefix(run_keys.attempt_prefix(submission_id, order, attempt), index)}/{run_keys.LOG_FILE}"
        entries.append(LogEntry(order, attempt, index, key, sizes.get(key), status, error, trace))
    if trial is None:
        for key, size in sizes.items():
            found = _PREDICT_KEY.match(key)
            if found and (task is None or int(found[1]) == task):
                entries.append(LogEntry(int(found[1]), int(found[2]), None, key, size))
    return sorted(entries, key=lambda e: (e.task, e.attempt, e.trial is None, e.trial or 0))


def log_keys(session: Session) -> set[str]:
    """The keys of every log the database's rows name: each trial's, and each attempt's
    prediction job's; the store's garbage collection keeps them as long as their rows live."""
    keys: set[str] = set()
    rows = session.execute(select(TaskRun.submission_id, StreamTask.order, TaskRun.attempt, Trial.trial_index)
                           .select_from(TaskRun).join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
                           .outerjoin(Trial, Trial.task_run_id == TaskRun.id))
    for submission_id, order, attempt, index in rows:
        prefix = run_keys.attempt_prefix(submission_id, order, attempt)
        keys.add(f"{prefix}/{run_keys.PREDICT_LOG_FILE}")
        if index is not None:
            keys.add(f"{run_keys.trial_prefix(prefix, index)}/{run_keys.LOG_FILE}")
    return keys


def read_log(store: ObjectStore, entry: LogEntry, *, tail_bytes: int) -> tuple[str, bool]:
    """The log's text (its last ``tail_bytes``), and whether it was cut; a trial without a
    stored log reads as its recorded error and traceback."""
    if entry.size is None:
        text = "\n".join(part for part in (entry.error, entry.traceback) if part)
        data = text.encode("utf-8")
    else:
        data = store.get_bytes(entry.key)
    cut = len(data) > tail_bytes
    return data[-tail_bytes:].decode("utf-8", "replace"), cut


__all__ = ["LogEntry", "list_logs", "log_keys", "read_log"]
