"""``nevis submit`` follows a remote run with ``nevis run``'s bars: each state of the submission,
as polled, moves them once (a task started, its trials, the task committed)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from services.cli.remote_follow import Follower
from services.cli.run_cmd import TaskBars


def _doc(status: str, tasks: list[tuple[str, int, int, float | None]], current: int | None) -> dict:
    return {
        "status": status,
        "budget": {"trials": 2},
        "current_task": None if current is None else {"order": current},
        "tasks": [
            {
                "order": i + 1,
                "dataset": f"shapes:{i}",
                "status": s,
                "trials": t,
                "failed_trials": f,
                "error": e,
                "flops": 1e6 if e is not None else 0.0,
                "flops_floored": False,
                "cpu_seconds": 2.0,
            }
            for i, (s, t, f, e) in enumerate(tasks)
        ],
    }


def test_polled_states_move_the_bars_once_each() -> None:
    out = io.StringIO()
    with Progress(console=Console(file=out, width=120)) as progress:
        follower = Follower(TaskBars(progress))
        states = [
            _doc("queued", [("pending", 0, 0, None), ("pending", 0, 0, None)], None),
            _doc("running", [("running", 1, 1, None), ("pending", 0, 0, None)], 1),
            _doc("running", [("committed", 2, 1, 0.25), ("pending", 0, 0, None)], 2),
            _doc("running", [("committed", 2, 1, 0.25), ("pending", 0, 0, None)], 2),  # the same poll again
            _doc("succeeded", [("committed", 2, 1, 0.25), ("committed", 2, 0, 0.5)], None),
        ]
        for doc in states:
            follower.update(doc)
        # the bars' totals: every task and every trial counted once
        assert progress.tasks[0].completed == 2 and progress.tasks[1].completed == 2
    text = out.getvalue()
    assert text.count("task   1 shapes:0") == 1 and text.count("task   2 shapes:1") == 1
    assert "error 0.2500" in text and "error 0.5000" in text
    assert text.count("failed") == 1  # task 1's one failed trial, reported once
