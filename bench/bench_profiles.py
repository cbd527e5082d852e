"""Performance profiles at a busy service's size: how long recomputing them takes.

Seeds a fresh SQLite database (or ``--postgres URL``: a fresh database on that server,
dropped at the end) with synthetic finished submissions (default 1,000 × 106 tasks, through
:mod:`tests.support.synthetic_results`) and times :func:`performance_profiles` (both profiles,
read from the task results) and, apart, the computation alone on the matrices it read.
Target (issue 23, item 3): < 5 s for 1,000 submissions × 106 tasks. Also timed: what the
leaderboard's profile-score column costs a render, :func:`profile_scores` once its scores are
kept (the finished submissions' points read and digested), and a page of 25 rows sorted by it.

    .venv/bin/python bench/bench_profiles.py [--submissions 1000] [--tasks 106] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from services.core.profiles import cflop_to_target_profile, error_profile, indep_target
from services.store.db import sessions_on, transaction, upgrade
from services.store.runs.board_front import front_points
from services.store.runs.leaderboard import leaderboard
from services.store.runs.profiles import performance_profiles, profile_scores, task_matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: its tests' seeding
from tests.support.synthetic_results import seed_results


def _database(postgres: str | None, folder: Path) -> tuple[str, str | None]:
    if postgres is None:
        return f"sqlite:///{folder / 'profiles.sqlite'}", None
    name = f"nevis_bench_profiles_{uuid.uuid4().hex[:8]}"
    admin = create_engine(postgres, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return make_url(postgres).set(database=name).render_as_string(hide_password=False), name


def _drop(postgres: str, name: str) -> None:
    admin = create_engine(postgres, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=106)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL admin URL (default: SQLite)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url, created = _database(args.postgres, Path(folder))
        try:
            upgrade(url)
            sessions = sessions_on(url)
            started = time.perf_counter()
            with transaction(sessions) as session:
                stream = seed_results(session, submissions=args.submissions, tasks=args.tasks, meta_test_from=1)
            print(
                f"seeded {args.submissions} x {args.tasks} in {time.perf_counter() - started:.1f} s "
                f"({url.split(':', 1)[0]})"
            )
            whole, alone = [], []
            for _ in range(args.repeat):
                with sessions() as session:
                    started = time.perf_counter()
                    found = performance_profiles(session, stream=stream.stream, version=stream.version)
                    whole.append(time.perf_counter() - started)
                    ids = [p.submission_id for p in front_points(session, stream=stream.stream, version=stream.version)]
                    _, errors, flops = task_matrix(session, ids)
                started = time.perf_counter()
                error_profile(errors)
                cflop_to_target_profile(errors, flops, indep_target(errors[:10]))
                alone.append(time.perf_counter() - started)
            print(
                f"profiles of {len(found.rows)} submissions x {found.tasks} tasks: best {min(whole):.2f} s "
                f"read and computed (target < 5 s), {min(alone) * 1000:.1f} ms computed alone; "
                f"best error score {found.rows[0].error_score:.3f}, reference runs {found.reference_runs}"
            )
            kept, sorted_page = [], []
            for _ in range(args.repeat):
                with sessions() as session:
                    started = time.perf_counter()
                    scores = profile_scores(session, stream=stream.stream, version=stream.version)
                    kept.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    leaderboard(
                        session, stream=stream.stream, version=stream.version, sort="profile", limit=25, profiles=scores
                    )
                    sorted_page.append(time.perf_counter() - started)
            print(
                f"leaderboard column: profile_scores {min(kept) * 1000:.0f} ms once kept (first call computed "
                f"them), a 25-row page sorted by them {min(sorted_page) * 1000:.0f} ms"
            )
        finally:
            if created is not None:
                _drop(args.postgres, created)
    return 0


if __name__ == "__main__":
    sys.exit(main())
