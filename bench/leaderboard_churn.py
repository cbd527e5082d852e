"""The writer of ``bench_leaderboard.py --churn``: meta-test tasks committed at a steady rate.

Each task is committed the way the runner commits one (:mod:`services.store.runs.records`: an
attempt, its trial, then :func:`~services.store.runs.records.commit_task` with its summary row),
one transaction per task, into submissions of the benchmark's stream version, so every commit
changes the leaderboard's rows and the cache's fingerprint. A submission that has committed
every task succeeds and the next one starts. Run as a process of its own, so its CPU and
its database connection are not the readers':

    python bench/leaderboard_churn.py URL STREAM VERSION TASKS_PER_MINUTE

It commits until its standard input closes, then prints one line, ``NEVIS_CHURN {json}``:
commits, seconds, the achieved rate per minute, the p50 / max seconds of a commit's
transaction, and errors (a failed transaction counts one and the writer goes on).
"""

from __future__ import annotations

import json
import select
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import select as sql_select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository
from services.core.budget import RunBudget
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import StreamTask, StreamVersion, Submission
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome

LEARNER = "churn"


class Writer:
    """Commits the next task of the current churn submission, one transaction a call."""

    def __init__(self, sessions: object, stream: str, version: str, seed: int = 0) -> None:
        self.sessions, self.submission_id, self.seed = sessions, None, seed
        with self.sessions() as session:  # type: ignore[operator]
            found = session.scalars(
                sql_select(StreamVersion).where(StreamVersion.name == stream, StreamVersion.version == version)
            ).one()
            self.version_id = found.id
            self.orders = [
                order
                for (order,) in session.execute(
                    sql_select(StreamTask.order)
                    .where(StreamTask.stream_version_id == found.id)
                    .order_by(StreamTask.order)
                )
            ]

    def commit_next(self) -> None:
        with transaction(self.sessions) as session:  # type: ignore[arg-type]
            submission = self._current(session)
            order = submission.cursor
            task = records.stream_task(session, stream_version_id=self.version_id, order=order)
            run = records.start_task_run(session, submission=submission, task=task)
            error = 0.3 + 0.2 * ((submission.id * 7919 + order) % 100) / 100
            trial = records.record_trial(
                session,
                task_run_id=run.id,
                outcome=TrialOutcome(
                    trial_index=0, seed=self.seed, status="ok", flops_measured=10**12 * (1 + order % 7), dev_error=error
                ),
            )
            later = [o for o in self.orders if o > order]
            records.commit_task(
                session,
                submission=submission,
                run=run,
                best_trial=trial,
                outcome=TaskOutcome(
                    order=order,
                    best_trial_index=0,
                    error=error,
                    split="test",
                    metric="accuracy",
                    flops=float(trial.flops),
                    wall_time_s=1.0,
                    peak_memory_bytes=0,
                    state_key=f"churn-{order}",
                ),
                next_order=later[0] if later else None,
            )
            if not later:
                self.submission_id = None

    def _current(self, session: Session) -> Submission:
        if self.submission_id is not None:
            return session.get(Submission, self.submission_id)
        submission = records.create_submission(
            session,
            learner=records.ensure_learner(session, spec=LEARNER, resources={}),
            stream_version=session.get(StreamVersion, self.version_id),
            phase="meta_test",
            budget=RunBudget(),
            image_size=32,
            first_order=self.orders[0],
        )
        self.submission_id = submission.id
        return submission


def main() -> int:
    url, stream, version, rate = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    engine = make_engine(url)
    writer = Writer(session_factory(engine), stream, version)
    interval = 60.0 / rate
    durations: list[float] = []
    errors = 0
    start = next_at = time.perf_counter()
    print("NEVIS_CHURN_READY", flush=True)
    while True:
        wait = max(0.0, next_at - time.perf_counter())
        if select.select([sys.stdin], [], [], wait)[0]:
            break  # standard input closed (or written): stop
        begin = time.perf_counter()
        try:
            writer.commit_next()
            durations.append(time.perf_counter() - begin)
        except Exception as exc:  # noqa: BLE001 - counted and reported; the writer goes on
            errors += 1
            print(f"commit failed: {exc!r}", file=sys.stderr, flush=True)
        next_at += interval
    seconds = time.perf_counter() - start
    engine.dispose()
    print(
        "NEVIS_CHURN "
        + json.dumps(
            {
                "commits": len(durations),
                "seconds": seconds,
                "per_minute": len(durations) / seconds * 60,
                "commit_p50_s": statistics.median(durations) if durations else None,
                "commit_max_s": max(durations) if durations else None,
                "errors": errors,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
