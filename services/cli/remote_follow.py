"""Follow a remote submission until it ends, with ``nevis run``'s progress bars.

The service is polled (``GET /v1/submissions/{id}``) and each change is fed to the same
:class:`~services.cli.run_cmd.TaskBars` that ``nevis run`` drives from its runner: a task that
starts, trials as their count grows, a task committed with its error and FLOPs. Ctrl-C stops
following, never the run.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.cli.client import FINISHED, NevisClient
from services.cli.run_cmd import TaskBars

POLL_S = 2.0


class Follower:
    """Turns successive submission documents into TaskBars calls."""

    def __init__(self, bars: TaskBars) -> None:
        self.bars = bars
        self.started: set[int] = set()
        self.committed: set[int] = set()
        self.trials: dict[int, tuple[int, int]] = {}  # order → (trials, failed) seen

    def update(self, doc: dict[str, Any]) -> None:
        tasks = doc.get("tasks") or []
        per_task = int((doc.get("budget") or {}).get("trials", 1))
        for position, task in enumerate(tasks, start=1):
            order, seen = task["order"], SimpleNamespace(order=task["order"], dataset=task["dataset"])
            active = task["status"] not in ("pending",) or (doc.get("current_task") or {}).get("order") == order
            if order not in self.started and active and doc["status"] != "queued":
                self.started.add(order)
                self.bars.task_started(seen, position, len(tasks), per_task)
            if order in self.started:
                self._trials(seen, task)
            if task["status"] == "committed" and order not in self.committed:
                self.committed.add(order)
                self.bars.task_committed(
                    seen,
                    SimpleNamespace(
                        error=task["error"] or 0.0,
                        flops=task["flops"] or 0.0,
                        flops_floored=bool(task.get("flops_floored")),
                        cpu_seconds=task.get("cpu_seconds"),
                    ),
                )

    def _trials(self, seen: SimpleNamespace, task: dict[str, Any]) -> None:
        done, failed = int(task.get("trials") or 0), int(task.get("failed_trials") or 0)
        before_done, before_failed = self.trials.get(seen.order, (0, 0))
        for index in range(before_done, done):
            ok = index - before_done >= failed - before_failed
            self.bars.trial_finished(
                seen, SimpleNamespace(ok=ok, trial_index=index, error="see `nevis status` for the task's error")
            )
        self.trials[seen.order] = (max(done, before_done), max(failed, before_failed))


def follow(
    client: NevisClient, submission_id: int, *, console: Console, poll_s: float = POLL_S
) -> dict[str, Any] | None:
    """Poll the submission until it is finished; returns its last document, or ``None`` after
    Ctrl-C (which detaches: the run goes on)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            follower = Follower(TaskBars(progress))
            while True:
                doc = client.submission(submission_id)
                follower.update(doc)
                if doc["status"] in FINISHED:
                    return doc
                time.sleep(poll_s)
    except KeyboardInterrupt:
        detached(submission_id, console)
        return None


def detached(submission_id: int, console: Console) -> None:
    console.print(
        f"[yellow]Detached.[/] Submission {submission_id} goes on: "
        f"`nevis status {submission_id}` shows it, `nevis cancel {submission_id}` stops it."
    )


__all__ = ["POLL_S", "Follower", "detached", "follow"]
