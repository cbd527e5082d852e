"""Verified rows: replay a finished public submission with new seeds, and judge the replays.

An operator (``nevis verify ID --seeds N``, ``POST /v1/submissions/{id}/verify``) or the
refresh schedule asks; :func:`request_replays` makes N new submissions of the same learner row
(so the same bundle digest, image or entry point), stream version, phase, image size, ruleset,
pretrained checkpoint and budget, only the budget's seed changed (seeds the original and its
earlier replays did not use), and links each to the original (``submission_replays``). When
they have all ended, :func:`settle` writes the original's mark (``submission_verdicts``):

- ``verified``: every replay's E lies inside the original's interval on this benchmark (the
  default stratified example-bootstrap interval of :mod:`services.core.uncertainty`, the one
  ``nevis results`` and the leaderboard show);
- ``not_reproduced``: some replay's E lies outside it;
- ``inconclusive``: a replay ended without an E (failed, cancelled, stopped before its last
  task), or the original has no interval (its predictions were not kept).

Why that interval: it is the band the row itself publishes as "how sure E is"; a learner whose
outcome depends on its seed no more than the test examples do stays inside it, and one whose
outcome is luck (or depends on anything but its inputs and seed) falls out. The replays never
touch the original's rows: only the verdict is written for it, and the boards leave replays
out (:func:`not_a_replay`), so a row is never ranked twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core.budget import RunBudget
from services.core.errors import NevisError, UnknownNameError
from services.core.uncertainty import Interval
from services.store.db.models import Learner, Submission
from services.store.db.models_scores import SubmissionInterval
from services.store.db.models_verify import SubmissionReplay, SubmissionVerdict
from services.store.db.types import utcnow
from services.store.objects import ObjectStore
from services.store.runs import records
from services.store.runs.interval_cache import from_document, is_current
from services.store.runs.summary import load_summary
from services.store.runs.verdicts import not_a_replay

MAX_SEEDS = 10
"""Most replays one request may ask for (each is a whole run)."""
FINISHED: tuple[str, ...] = ("succeeded", "stopped")
"""An original must have ended in one of these (it has its final E)."""
ENDED: tuple[str, ...] = ("succeeded", "stopped", "failed", "cancelled")


class NotVerifiableError(NevisError, ValueError):
    """The submission cannot be replayed (not finished, not public, a replay itself, ...)."""


def learner_digest(learner: Learner) -> str:
    """What identifies the code a run ran: its bundle's sha256, else its image, else its entry point."""
    if learner.bundle_sha256:
        return f"sha256:{learner.bundle_sha256}"
    return learner.image_ref or learner.entrypoint


def check_verifiable(session: Session, *, submission_id: int) -> Submission:
    """The original to replay.

    Raises:
        UnknownNameError: no such submission. NotVerifiableError: it is not a finished public
            submission of its own (a replay is verified through its original).
    """
    original = session.get(Submission, submission_id)
    if original is None:
        raise UnknownNameError(f"No run with id {submission_id} in this database.")
    replayed = session.get(SubmissionReplay, submission_id)
    if replayed is not None:
        raise NotVerifiableError(
            f"Run {submission_id} is a replay of run {replayed.original_id}; verify run {replayed.original_id}."
        )
    if original.visibility != "public":
        raise NotVerifiableError(f"Run {submission_id} is private; only public runs are verified.")
    if original.status not in FINISHED:
        raise NotVerifiableError(
            f"Run {submission_id} is {original.status}; only a finished run (succeeded or stopped) is verified."
        )
    return original


def replay_seeds(session: Session, *, original: Submission, count: int) -> list[int]:
    """``count`` seeds that neither the original nor any of its replays ran with, in order."""
    if not 1 <= count <= MAX_SEEDS:
        raise NotVerifiableError(f"seeds must be between 1 and {MAX_SEEDS}; got {count}.")
    used = {int(original.budget.get("seed", 0))}
    used |= {
        int(s)
        for s in session.scalars(select(SubmissionReplay.seed).where(SubmissionReplay.original_id == original.id))
    }
    seeds, candidate = [], max(used) + 1
    while len(seeds) < count:
        if candidate not in used:
            seeds.append(candidate % 2**31)
        candidate += 1
    return seeds


def request_replays(
    session: Session, *, submission_id: int, seeds: int, requested_by: str | None, status: str = "queued"
) -> list[Submission]:
    """Make ``seeds`` replays of the submission (in the caller's transaction) and mark it
    ``pending``; returns the new submissions (the caller schedules or runs them)."""
    original = check_verifiable(session, submission_id=submission_id)
    verdict = session.get(SubmissionVerdict, original.id, with_for_update=True)
    if verdict is None:
        verdict = SubmissionVerdict(submission_id=original.id, verdict="pending", replays=[], request=1)
        session.add(verdict)
    else:
        verdict.request += 1
        verdict.verdict, verdict.decided_at, verdict.note, verdict.replays = "pending", None, None, []
    session.flush()
    budget = RunBudget.from_dict(original.budget)
    digest = learner_digest(original.learner)
    first_order = min(
        t.order for t in original.stream_version.tasks if original.phase == "meta_test" or t.phase == "meta_train"
    )
    made = []
    for seed in replay_seeds(session, original=original, count=seeds):
        replay = records.create_submission(
            session,
            learner=original.learner,
            stream_version=original.stream_version,
            phase=original.phase,
            budget=RunBudget(**{**budget.to_dict(), "seed": seed}),
            image_size=original.image_size,
            first_order=first_order,
            status=status,
            visibility=original.visibility,
            ruleset=original.ruleset,
        )
        replay.pretrained_key, replay.cflop_pretraining = original.pretrained_key, original.cflop_pretraining
        replay.code_url = original.code_url
        session.add(
            SubmissionReplay(
                replay_id=replay.id,
                original_id=original.id,
                seed=seed,
                learner_digest=digest,
                requested_by=requested_by,
                request=verdict.request,
            )
        )
        records.add_event(
            session,
            submission_id=replay.id,
            kind="submission.replay",
            payload={"original_id": original.id, "seed": seed, "learner_digest": digest},
        )
        made.append(replay)
    session.flush()
    records.add_event(
        session,
        submission_id=original.id,
        kind="submission.verify_requested",
        payload={"replays": [r.id for r in made], "requested_by": requested_by, "request": verdict.request},
    )
    verdict.replays = [[r.id, None, r.status] for r in made]
    return made


def original_interval(session: Session, store: ObjectStore | None, *, submission_id: int) -> Interval | None:
    """The original's interval of E on this benchmark: the one its leaderboard row keeps, else
    computed from its stored predictions (with a store); None when there is none."""
    kept = session.get(SubmissionInterval, submission_id)
    if kept is not None and kept.interval and is_current(kept.interval):
        return from_document(kept.interval).interval
    if store is None:
        return None
    from services.store.runs.uncertainty import run_interval_of  # noqa: PLC0415 - uncertainty imports board summaries

    return run_interval_of(session, store, submission_id=submission_id).interval


def settle(session: Session, store: ObjectStore | None, *, submission_id: int) -> SubmissionVerdict | None:
    """Judge the original's latest replays if they have all ended (in the caller's transaction);
    its verdict row (None: never verified). A pending verdict stays pending while one runs."""
    verdict = session.get(SubmissionVerdict, submission_id)
    if verdict is None:
        return None
    replays = session.execute(
        select(SubmissionReplay.replay_id, Submission.status)
        .join(Submission, Submission.id == SubmissionReplay.replay_id)
        .where(SubmissionReplay.original_id == submission_id, SubmissionReplay.request == verdict.request)
        .order_by(SubmissionReplay.replay_id)
    ).all()
    found = []
    for replay_id, status in replays:
        summary = load_summary(session, submission_id=replay_id)
        done = sum(r.error is not None for r in summary.tasks if r.phase == summary.phase) == summary.headline_tasks
        found.append([replay_id, summary.mean_error if done and status in FINISHED else None, status])
    verdict.replays = found
    if not found or any(status not in ENDED for _, _, status in found):
        return verdict
    interval = original_interval(session, store, submission_id=submission_id)
    verdict.low, verdict.high = (interval.low, interval.high) if interval else (None, None)
    verdict.level = interval.level if interval else None
    verdict.decided_at = utcnow()
    missing = [replay_id for replay_id, error, _ in found if error is None]
    if interval is None:
        verdict.verdict, verdict.note = "inconclusive", f"run {submission_id} has no interval of E to judge by"
    elif missing:
        verdict.verdict = "inconclusive"
        verdict.note = "replay(s) " + ", ".join(map(str, missing)) + " ended without an E"
    else:
        outside = [replay_id for replay_id, error, _ in found if interval.excludes(error)]
        verdict.verdict = "not_reproduced" if outside else "verified"
        verdict.note = (
            f"replay(s) {', '.join(map(str, outside))} outside [{interval.low:.4f}, {interval.high:.4f}]"
            if outside
            else None
        )
    records.add_event(
        session,
        submission_id=submission_id,
        kind="submission.verified",
        payload={"verdict": verdict.verdict, "replays": found, "interval": [verdict.low, verdict.high]},
    )
    session.flush()
    return verdict


def settle_replay(session: Session, store: ObjectStore | None, *, replay_id: int) -> SubmissionVerdict | None:
    """After a run ended: settle its original's verdict if it is a replay (else nothing)."""
    link = session.get(SubmissionReplay, replay_id)
    return None if link is None else settle(session, store, submission_id=link.original_id)


def settle_pending(session: Session, store: ObjectStore | None, *, limit: int = 100) -> list[int]:
    """Settle pending verdicts whose replays have all ended (the scheduler's pass); their ids."""
    ids = session.scalars(
        select(SubmissionVerdict.submission_id)
        .where(SubmissionVerdict.verdict == "pending")
        .order_by(SubmissionVerdict.submission_id)
        .limit(limit)
    ).all()
    return [i for i in ids if (v := settle(session, store, submission_id=i)) is not None and v.verdict != "pending"]


def replay_count(session: Session, *, submission_ids: Sequence[int]) -> dict[int, int]:
    """How many replays each of these originals has had, over every request."""
    rows = session.execute(
        select(SubmissionReplay.original_id, func.count())
        .where(SubmissionReplay.original_id.in_(list(submission_ids)))
        .group_by(SubmissionReplay.original_id)
    )
    return {original: int(n) for original, n in rows}


__all__ = [
    "ENDED",
    "FINISHED",
    "MAX_SEEDS",
    "NotVerifiableError",
    "check_verifiable",
    "learner_digest",
    "not_a_replay",
    "original_interval",
    "replay_count",
    "replay_seeds",
    "request_replays",
    "settle",
    "settle_pending",
    "settle_replay",
]
