"""Who may read which submission: the one rule every read path applies.

A submission is ``public`` (the default) or ``private`` (``submissions.visibility``). Public
ones are everyone's to read. A private one is read only by its owner (the user who submitted
it over the API, ``scheduled_submissions.user_id``) and by admins; to anyone else it does not
exist: it is absent from the leaderboard, the Pareto front and the list of stream versions,
and its pages answer as an unknown id would (a 404 with the same words, so ids do not tell
which private submissions exist). A private local run (``nevis run --private``) has no owner,
so only admins read it over HTTP.

The rule lives here, in SQL, so the leaderboard's read model, the dashboard's pages and the
API's routes cannot disagree about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, exists, or_, select, true
from sqlalchemy.orm import Session

from services.core.errors import UnknownNameError
from services.store.db.models import Submission
from services.store.db.models_coordinator import ScheduledSubmission


@dataclass(frozen=True)
class Viewer:
    """Who reads: anonymous (no ``user_id``), a user, or an admin (who reads everything).

    Frozen and hashable: a read model's answer cached for one viewer is keyed by it, and
    every anonymous viewer is the same :data:`ANONYMOUS`.
    """

    user_id: int | None = None
    admin: bool = False


ANONYMOUS = Viewer()
"""A reader without a token; also any reader who may see no private submission."""


def visible_to(viewer: Viewer) -> ColumnElement[bool]:
    """SQL: the submissions ``viewer`` may read (a WHERE clause on :class:`Submission`)."""
    if viewer.admin:
        return true()
    public = Submission.visibility == "public"
    if viewer.user_id is None:
        return public
    owned = select(ScheduledSubmission.submission_id).where(ScheduledSubmission.user_id == viewer.user_id)
    return or_(public, Submission.id.in_(owned))


def sees_private(session: Session, viewer: Viewer) -> bool:
    """Whether ``viewer`` may read at least one private submission (else it reads exactly
    what an anonymous reader does, and may share that reader's cached answers)."""
    if viewer == ANONYMOUS:
        return False
    return bool(session.scalar(select(exists().where(Submission.visibility == "private", visible_to(viewer)))))


ADMIN = Viewer(admin=True)
"""Any admin: admins all read the same (everything)."""


def effective_viewer(session: Session, viewer: Viewer) -> Viewer:
    """The viewer that reads what ``viewer`` reads, as few as there are views: every admin
    is :data:`ADMIN`, and anyone who may see no private submission is :data:`ANONYMOUS`, so
    answers are rendered and cached apart only for readers who do see private rows."""
    if not sees_private(session, viewer):
        return ANONYMOUS
    return ADMIN if viewer.admin else viewer


def may_read(session: Session, viewer: Viewer, submission_id: int) -> bool:
    """Whether the submission exists and ``viewer`` may read it."""
    return session.scalar(select(Submission.id).where(Submission.id == submission_id, visible_to(viewer))) is not None


def check_readable(session: Session, viewer: Viewer, submission_ids: Sequence[int]) -> None:
    """Raise what an unknown id raises for the first id ``viewer`` may not read.

    Raises:
        UnknownNameError: worded as :func:`services.store.runs.summary.load_summary` words an
            id that does not exist, so a private id cannot be told from a missing one.
    """
    for submission_id in submission_ids:
        if not may_read(session, viewer, submission_id):
            raise UnknownNameError(f"No run with id {submission_id} in this database.")


__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "Viewer",
    "check_readable",
    "effective_viewer",
    "may_read",
    "sees_private",
    "visible_to",
]
