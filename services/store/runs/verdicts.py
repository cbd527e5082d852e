"""What a reader sees of verification: a row's mark and a submission's verification detail.

Read models over ``submission_verdicts`` and ``submission_replays``
(:mod:`services.store.runs.verification` writes them). A leaderboard row carries its mark
(``verified`` / ``not_reproduced``, or None) and its replays' ids; a submission's detail
carries the whole verdict (the interval it was judged by, each replay's seed, status and E,
and whether it fell inside), and a replay's detail names its original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from services.store.db.models import Submission
from services.store.db.models_verify import MARKS, SubmissionReplay, SubmissionVerdict

LEGEND: dict[str, str] = {
    "verified": "replayed with new seeds by an operator; every replay's E fell inside this row's 95 % interval",
    "not_reproduced": "replayed with new seeds by an operator; some replay's E fell outside this row's 95 % interval",
}
"""What each mark means, as the leaderboard's legend and docs/rules.md say it."""


def not_a_replay() -> ColumnElement[bool]:
    """SQL: the submissions that are no replay (a WHERE clause on :class:`Submission`): boards,
    fronts, profiles and seed groups leave replays out, so a row is never ranked twice and a
    replay never moves its original's numbers (nor the spread over seeds shown beside them)."""
    return Submission.id.not_in(select(SubmissionReplay.replay_id))


@dataclass(frozen=True)
class RowMark:
    """A leaderboard row's verification mark: the verdict and the replays it rests on."""

    verdict: str  # pending, verified, not_reproduced, inconclusive
    replays: tuple[int, ...]

    @property
    def mark(self) -> str | None:
        """What the row shows: verified or not_reproduced; None otherwise."""
        return self.verdict if self.verdict in MARKS else None

    def row_fields(self) -> dict[str, Any]:
        """The leaderboard row's fields (:class:`~services.store.runs.leaderboard.LeaderboardRow`)."""
        return {"verification": self.verdict, "verified_mark": self.mark, "replays": self.replays}


def marks_of(session: Session, submission_ids: Sequence[int]) -> dict[int, RowMark]:
    """The verification of each of these submissions that has one (one query; none for no ids:
    a board passes only the rows its page query found a verdict for)."""
    ids = list(submission_ids)
    if not ids:
        return {}
    verdicts: dict[int, str] = {}
    replays: dict[int, list[int]] = {}
    for original, verdict, replay in session.execute(
        select(SubmissionVerdict.submission_id, SubmissionVerdict.verdict, SubmissionReplay.replay_id)
        .outerjoin(SubmissionReplay, SubmissionReplay.original_id == SubmissionVerdict.submission_id)
        .where(SubmissionVerdict.submission_id.in_(ids))
        .order_by(SubmissionReplay.replay_id)
    ):
        verdicts[original] = verdict
        if replay is not None:
            replays.setdefault(original, []).append(replay)
    return {i: RowMark(verdicts[i], tuple(replays.get(i, ()))) for i in ids if i in verdicts}


@dataclass(frozen=True)
class Verification:
    """A submission's verification, as its detail (API, ``nevis results``, ``nevis verify``) shows it."""

    submission_id: int
    verdict: str | None  # None: never verified
    interval: tuple[float, float, float] | None  # (low, high, level) it was judged by
    replays: list[dict[str, Any]] = field(default_factory=list)  # id, seed, status, error, inside, request
    note: str | None = None
    replay_of: int | None = None  # this submission is a replay of that one

    @property
    def mark(self) -> str | None:
        return self.verdict if self.verdict in MARKS else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "submission_id": self.submission_id,
            "verdict": self.verdict,
            "mark": self.mark,
            "interval": None
            if self.interval is None
            else {"low": self.interval[0], "high": self.interval[1], "level": self.interval[2]},
            "replays": self.replays,
            "note": self.note,
            "replay_of": self.replay_of,
        }


def verification_of(session: Session, *, submission_id: int) -> Verification:
    """The submission's verification (an empty one when it was never verified)."""
    link = session.get(SubmissionReplay, submission_id)
    replay_of = link.original_id if link else None
    verdict = session.get(SubmissionVerdict, submission_id)
    if verdict is None:
        return Verification(submission_id, None, None, replay_of=replay_of)
    judged = {int(row[0]): row for row in verdict.replays or []}
    interval = None if verdict.low is None or verdict.high is None else (verdict.low, verdict.high, verdict.level)
    replays = []
    for link_row in session.scalars(
        select(SubmissionReplay)
        .where(SubmissionReplay.original_id == submission_id)
        .order_by(SubmissionReplay.replay_id)
    ):
        row = judged.get(link_row.replay_id)
        error = None if row is None else row[1]
        replays.append(
            {
                "id": link_row.replay_id,
                "seed": link_row.seed,
                "request": link_row.request,
                "status": None if row is None else row[2],
                "error": error,
                "inside": None if error is None or interval is None else interval[0] <= error <= interval[1],
                "learner_digest": link_row.learner_digest,
            }
        )
    return Verification(submission_id, verdict.verdict, interval, replays, verdict.note, replay_of)


__all__ = ["LEGEND", "RowMark", "Verification", "marks_of", "not_a_replay", "verification_of"]
