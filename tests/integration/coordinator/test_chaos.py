"""The chaos script (``bench/chaos.py``) in small: every task committed exactly once under kills.

Two submissions of ``mini``'s meta-train phase (3 tasks each, 2 trials a task) run through a real ``nevis
serve`` on the script's own PostgreSQL cluster (not the shared server: it is restarted), and
the script kills, once each, a trial's learner host, a worker harness, the coordinator, and
PostgreSQL (``pg_ctl restart``). Its kill points are states it sees in the database and in
``/proc`` (a task's run open, a trial recorded, a learner host in a trial), never a clock,
and every kill it plans is made at the first such point that comes (the last tasks let none
pass), so each kind happens whatever the machine's speed.

The test runs the script as a process (it owns the processes it starts), reads its JSON
report, and checks: no loss, no duplicate, both submissions succeeded, each kind of kill
made, FLOPs of the killed attempts reported apart (and equal to their trials' FLOPs), and
nothing left running or on disk afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).resolve().parents[3] / "bench" / "chaos.py"
KINDS = ("trial", "worker", "coordinator", "postgres")


def _chaos_module():
    """``bench/chaos.py`` as a module (``bench`` is no package; dataclasses need it in
    ``sys.modules`` while it loads)."""
    if "nevis_bench_chaos" not in sys.modules:
        spec = importlib.util.spec_from_file_location("nevis_bench_chaos", CHAOS)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["nevis_bench_chaos"]


def _marked(marker: str) -> list[int]:
    """Live processes whose environment carries the script's marker."""
    needle = f"NEVIS_CHAOS_RUN={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_the_kill_plan_is_the_seed_s_and_any_loss_or_duplicate_fails_the_verdict():
    chaos = _chaos_module()
    counts = {kind: 2 for kind in KINDS}
    plan = chaos.plan_kills(random.Random(5), counts)
    assert plan == chaos.plan_kills(random.Random(5), counts)
    assert sorted(k.kind for k in plan) == sorted(KINDS * 2)
    first_worker = next(k for k in plan if k.kind == "worker")
    assert first_worker.stage == "trial"  # its attempt leaves FLOPs to report apart
    assert all(k.skip in (0, 1) and 0 <= k.delay_s <= 1 for k in plan)

    clean = dict(runs=2, seed=0, phase="meta_train", tasks_expected=6, tasks_committed=6)
    assert chaos.Report(**clean).ok
    for bad in (
        {"losses": 1, "tasks_committed": 5},
        {"duplicates": 1},
        {"failed": ["submission 2: failed: task 3 failed after 6 attempts"]},
        {"flop_problems": ["API retried_flops 0 != trials of uncommitted attempts 5"]},
        {"error": "the submissions did not end within 2400 s"},
    ):
        report = chaos.Report(**{**clean, **bad})
        assert not report.ok, bad
        assert chaos.render(report).endswith("verdict: NOT OK"), bad


@pytest.mark.postgres  # starts a PostgreSQL cluster of its own (server binaries; root or not)
def test_kills_of_every_kind_lose_and_duplicate_no_task(tmp_path):
    report_path = tmp_path / "chaos.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEVIS_") or k == "NEVIS_OFFLINE_DATA_DIR"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(CHAOS),
            "--runs",
            "2",
            "--kills",
            "1",
            "--seed",
            "7",
            "--trials",
            "2",
            "--timeout",
            "2400",
            "--json",
            str(report_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        out, err = proc.communicate(timeout=3000)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the script still stops what it started and removes its folder
        out, err = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    shown = f"exit {done.returncode}\n{done.stdout}\n--- stderr ---\n{done.stderr[-6000:]}"
    assert report_path.exists(), shown
    report = json.loads(report_path.read_text())
    assert done.returncode == 0 and report["ok"], shown
    assert report["error"] is None, shown

    assert report["tasks_expected"] == 6, shown  # 2 submissions x mini's 3 meta-train tasks
    assert report["tasks_committed"] == 6, shown
    assert report["losses"] == 0 and report["duplicates"] == 0, shown
    assert report["submissions"] == {"succeeded": 2} and report["failed"] == [], shown

    for kind in KINDS:
        assert report["kills"][kind]["effective"] >= 1, (kind, shown)
    assert report["coordinator_starts"] >= 2 and report["postgres_restarts"] >= 1, shown
    worker_kill = next(k for k in report["kill_log"] if k["kind"] == "worker" and k["effective"])
    assert worker_kill["trials_recorded"] >= 1, shown

    # The killed worker's attempt had recorded trials: its FLOPs are retried work, reported
    # apart (the API's figure equals the trials of the attempts that were not committed),
    # and cFLOP is the committed results alone (the script checks it against the API).
    assert report["retried_attempts"] >= 1, shown
    assert report["retried_flops"] > 0, shown
    assert report["retried_flops"] == pytest.approx(report["retried_flops_db"]), shown
    assert report["flop_problems"] == [], shown
    assert report["cflop"] > 0, shown

    for line in ("N = 2", "duplicates 0", "losses 0", "retried FLOPs", "verdict: OK"):
        assert line in done.stdout, shown
    for kind in KINDS:
        assert f"kills {kind}" in done.stdout, shown

    # Everything the script started is gone, and so is its folder (PostgreSQL's included).
    assert _marked(report["marker"]) == [], shown
    assert not Path(report["workdir"]).exists(), shown
