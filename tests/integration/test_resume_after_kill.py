"""``nevis run`` killed with SIGKILL mid-task, then ``nevis run --resume``: nothing twice.

The whole process group of the first run (the CLI and the Ray processes it started) is
killed while task 2 is half done; the resumed run must commit every task exactly once,
keep the FLOPs of the killed attempt apart as retried work, and print the same numbers
that ``nevis results --json`` reads back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

FIXTURE_LEARNERS = Path(__file__).parent / "learner_fixtures"
NEVIS = Path(sys.executable).parent / "nevis"


def _query(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


def _wait_for(url: str, sql: str, *, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended before it could be killed:\n{out}\n{err}")
        try:
            if _query(url, sql)[0][0]:
                return
        except Exception:  # noqa: BLE001 - the schema may not exist yet
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for: {sql}")


# SQLite, the laptop's database: resume on PostgreSQL through the coordinator is test_local_e2e.py.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_kill_minus_nine_then_resume(settings_env, database_url, tiny_stream) -> None:
    env = {
        **os.environ,
        "NEVIS_DATA_DIR": str(settings_env),
        "NEVIS_DATABASE_URL": database_url,
        "PYTHONPATH": os.pathsep.join([str(FIXTURE_LEARNERS), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    command = [
        str(NEVIS),
        "run",
        "--stream",
        str(tiny_stream),
        "--learner",
        "nevis_test_learners:slow",
        "--trials",
        "2",
        "--steps",
        "2",
        "--max-concurrent",
        "1",
    ]
    first = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        # Task 1 committed, and task 2 has one finished trial and one running.
        _wait_for(database_url, "SELECT count(*) FROM task_results", timeout_s=240, proc=first)
        _wait_for(
            database_url,
            "SELECT count(*) FROM trials t JOIN task_runs r ON t.task_run_id = r.id "
            'JOIN stream_tasks s ON r.stream_task_id = s.id WHERE s."order" = 2',
            timeout_s=120,
            proc=first,
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    assert _query(database_url, "SELECT count(*) FROM task_results")[0][0] == 1

    resumed = subprocess.run([str(NEVIS), "run", "--resume", "1"], env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resuming run 1" in resumed.stdout

    results = _query(
        database_url,
        'SELECT s."order", count(*) FROM task_results r JOIN stream_tasks s '
        'ON r.stream_task_id = s.id GROUP BY s."order" ORDER BY 1',
    )
    assert results == [(1, 1), (2, 1), (3, 1)]
    attempts = _query(
        database_url,
        'SELECT s."order", r.attempt, r.status, r.retried_flops FROM task_runs r '
        "JOIN stream_tasks s ON r.stream_task_id = s.id ORDER BY 1, 2",
    )
    assert [(o, a, st) for o, a, st, _ in attempts] == [
        (1, 1, "succeeded"),
        (2, 1, "failed"),
        (2, 2, "succeeded"),
        (3, 1, "succeeded"),
    ]
    killed_trial_flops = _query(
        database_url,
        "SELECT sum(t.flops) FROM trials t JOIN task_runs r ON t.task_run_id = r.id WHERE r.status = 'failed'",
    )[0][0]
    assert killed_trial_flops > 0 and attempts[2][3] == pytest.approx(killed_trial_flops)

    shown = subprocess.run(
        [str(NEVIS), "results", "1", "--json"], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    summary = json.loads(shown.stdout)
    committed = _query(database_url, "SELECT sum(flops) FROM task_results")[0][0]
    assert summary["cflop"] == pytest.approx(committed)
    assert summary["retried_flops"] == pytest.approx(killed_trial_flops)
    assert summary["status"] == "succeeded"
    assert f"cFLOP = {summary['cflop']:.4e}" in resumed.stdout
