"""The coordinator's side of verified rows: queue replays for the scheduler, settle verdicts.

``POST /v1/submissions/{id}/verify`` (operators) and the refresh schedule's
``NEVIS_REFRESH_VERIFY_SEEDS`` queue a finished public submission's replays
(:func:`services.store.runs.verification.request_replays`) as submissions the scheduler runs
like any other, owned by whoever asked (the operator, or the refresh user). A replay's verdict
is settled when its run ends (the stream runner), and every scheduler pass settles the
pending ones whose replays ended otherwise (failed, cancelled, expired).
"""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import CoordinatorSettings
from services.store.db import transaction
from services.store.db.models import Submission
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.db.models_verify import SubmissionVerdict
from services.store.objects import ObjectStore
from services.store.runs import records
from services.store.runs.verification import not_a_replay, request_replays, settle_pending

log = logging.getLogger("nevis.verify")


def queue_replays(
    session: Session, *, settings: CoordinatorSettings, submission_id: int, seeds: int, owner: User
) -> list[int]:
    """Queue ``seeds`` replays of the submission for the scheduler (in the caller's
    transaction), owned by ``owner``; their ids. Quotas are not checked: the service runs them."""
    made = request_replays(session, submission_id=submission_id, seeds=seeds, requested_by=owner.name)
    for replay in made:
        session.add(ScheduledSubmission(submission_id=replay.id, user_id=owner.id))
        records.add_event(
            session,
            submission_id=replay.id,
            kind="submission.queued",
            payload={
                "user": owner.name,
                "backend": settings.backend,
                "learner": replay.learner.name,
                "visibility": replay.visibility,
                "replay_of": submission_id,
            },
        )
    session.flush()
    return [r.id for r in made]


def unverified(session: Session, *, limit: int) -> list[int]:
    """Finished public meta-test submissions (no replays) never verified, oldest first."""
    return list(
        session.scalars(
            select(Submission.id)
            .where(
                Submission.status == "succeeded",
                Submission.visibility == "public",
                Submission.phase == "meta_test",
                not_a_replay(),
                Submission.id.not_in(select(SubmissionVerdict.submission_id)),
            )
            .order_by(Submission.id)
            .limit(limit)
        )
    )


def settle_verdicts(sessions: sessionmaker[Session], store: ObjectStore | None) -> list[int]:
    """Settle pending verdicts whose replays all ended (one transaction); their ids. Cheap
    when none is pending: one read, no writer transaction."""
    with sessions() as session:
        pending = session.scalar(select(SubmissionVerdict.submission_id).where(SubmissionVerdict.verdict == "pending"))
    if pending is None:
        return []
    with transaction(sessions) as session:
        settled = settle_pending(session, store)
    if settled:
        log.info("verdicts settled: %s", settled)
    return settled


__all__ = ["queue_replays", "settle_verdicts", "unverified"]
