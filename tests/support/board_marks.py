"""Marking a seeded board's result and reading the mark back: what the tests of each row mark
(near floor, inconsistent, ...) share."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.coordinator.crud import users
from services.store.db.models import StreamTask, TaskResult
from services.store.db.models_coordinator import ScheduledSubmission
from services.store.runs.scores import rescore


def mark_first_result(session: Session, submission_id: int, *, phase: str | None = None, **values: Any) -> None:
    """Set ``values`` on the submission's first result (of ``phase`` if given), then rescore
    it, as a commit keeps the board's aggregate."""
    query = select(TaskResult.id).where(TaskResult.submission_id == submission_id)
    if phase is not None:
        query = query.join(StreamTask, StreamTask.id == TaskResult.stream_task_id).where(StreamTask.phase == phase)
    result_id = session.scalars(query.order_by(TaskResult.id)).first()
    session.execute(update(TaskResult).where(TaskResult.id == result_id).values(**values))
    rescore(session, submission_ids=[submission_id])


def owner_auth(session: Session, submission_ids: list[int]) -> dict[str, str]:
    """One submitter owning these submissions; the header of their token."""
    owner = users.create_user(session, name="owner", role="submitter")
    session.add_all([ScheduledSubmission(submission_id=i, user_id=owner.id) for i in submission_ids])
    _, secret = users.create_token(session, user=owner, label="t")
    return {"Authorization": f"Bearer {secret}"}


def board_row(page: str, submission_id: int) -> str:
    """The leaderboard page's row of one submission."""
    return re.search(rf'<tr[^>]*data-submission="{submission_id}".*?</tr>', page, re.S).group(0)


__all__ = ["board_row", "mark_first_result", "owner_auth"]
