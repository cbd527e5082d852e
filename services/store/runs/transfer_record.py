"""A run's transfer record: FT-d's choices read once, when a task commits, from the learner
state committed with it, and kept bounded beside the attempt's predictions.

The submission page is anonymous and the state is the learner's own bytes: reading it on every
view let a forged state of 3,000 choices cost 41 s and 270 MB a page (issue 44). So the harness
reads it once, at commit (:func:`services.store.runs.transfer.keep_transfer_record`), keeps at
most :data:`MAX_RECORD_BYTES` of what it found as JSON under the attempt
(:func:`~services.store.key_layout.transfer_record_key`), and the page reads only that: an
object whose size is checked before a byte is read, whatever the state held.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.transfer import Choice
from services.store.db.models import StreamTask, TaskResult, TaskRun
from services.store.key_layout import transfer_record_key

MAX_RECORD_BYTES = 1 << 20
"""The largest transfer record kept: the full NEVIS'22 stream's 106 × 106 matrix is about 0.3 MiB."""
FORMAT = 1


def latest_record_key(session: Session, *, submission_id: int) -> str | None:
    """The transfer record key of the submission's latest committed task (None: none committed)."""
    row = session.execute(
        select(StreamTask.order, TaskRun.attempt)
        .select_from(TaskResult)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .where(TaskResult.submission_id == submission_id)
        .order_by(TaskResult.id.desc())
        .limit(1)
    ).first()
    return None if row is None else transfer_record_key(submission_id, *row)


def encode_record(choices: Mapping[int, Choice], reason: str | None, *, state_sha256: str | None) -> bytes:
    """The record's JSON: the choices in task order while they fit in :data:`MAX_RECORD_BYTES`
    (the rest left out, and the reason says so)."""
    kept: list[dict[str, Any]] = []
    size = 512  # the document's other fields, generously
    for task in sorted(choices):
        entry = _entry(choices[task])
        size += len(json.dumps(entry)) + 2
        if size > MAX_RECORD_BYTES:
            reason = f"the first {len(kept)} of the {len(choices)} tasks' choices are kept (the record's bound)"
            break
        kept.append(entry)
    doc = {"format": FORMAT, "state_sha256": state_sha256, "choices": kept, "reason": reason}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_record(data: bytes) -> tuple[dict[int, Choice], str | None]:
    """The choices and reason a record holds (written by :func:`encode_record`, never a learner)."""
    doc = json.loads(data)
    choices = {
        int(c["task"]): Choice(
            task=int(c["task"]),
            chosen=int(c["chosen"]),
            knn_errors={int(k): float(v) for k, v in c["knn_errors"].items()},
            fresh_error=c["fresh_error"],
            fresh_would_win=c["fresh_would_win"],
        )
        for c in doc["choices"]
    }
    return choices, doc.get("reason")


def _entry(choice: Choice) -> dict[str, Any]:
    return {
        "task": choice.task,
        "chosen": choice.chosen,
        "knn_errors": {str(k): v for k, v in sorted(choice.knn_errors.items())},
        "fresh_error": choice.fresh_error,
        "fresh_would_win": choice.fresh_would_win,
    }


__all__ = ["FORMAT", "MAX_RECORD_BYTES", "decode_record", "encode_record", "latest_record_key"]
