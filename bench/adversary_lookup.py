"""The public-labels attack of issue 44 (finding 1) against a deployment with a split salt, for
``bench/adversaries.py``: a submitter prepares the public data without the salt, as anyone can,
and carries what it read as a table of image hash → label. Two tables: the public test split's
(``lookup_test_split``) and the whole dataset's (``lookup_whole_dataset``); both learners answer
only from their table (every other image with one fixed class).

On drawn (salted) splits the first may know only the rows the two draws share, so it must score
near chance (an error within :data:`NEAR_CHANCE` of 1 − 1/K) or be marked; the second knows
every row whatever the split, so only the consistency check can stop it: it must be marked
inconsistent. Either way, a table that buys a score without a mark is a finding.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

SALT = "bench-adversaries-split-salt-1"
"""The deployment's secret salt here (16+ characters); the submitter's preparation has none."""
NEAR_CHANCE = 0.25
"""How far below chance error a learner answering from a table may score and count as near chance."""
SPLITS = ("train", "dev", "dev_test", "test")


def _write_table(folder: Path, module: str, pairs: Any) -> int:
    import hashlib

    import numpy as np

    table = {hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(): int(y) for x, y in pairs}
    (folder / f"{module}.py").write_text(f"TABLE = {table!r}\n")
    return len(table)


def lookup_adversaries(folder: Path, stream: str, fixtures: Path, make_runner: Callable[..., Any]) -> list[dict]:
    """Each lookup learner's outcome on the salted deployment (``Outcome`` fields)."""
    from sqlalchemy import select

    from services.core.budget import RunBudget
    from services.store.db.models import TaskResult
    from workers.stream.task_data import load_task_data
    from workers.trainer.run_plan import RunRequest

    budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,), max_concurrent=1)
    tables = folder / "lookup-tables"
    tables.mkdir()
    public = make_runner(import_paths=[str(fixtures)])  # the submitter's own, unsalted preparation
    run = public.start(RunRequest(stream=stream, learner="nevis_test_learners:nearest_mean", budget=budget))
    plan = public.plan(run)
    task = plan.tasks[0]
    data = load_task_data(public.store, task, image_size=plan.image_size, splits=SPLITS).splits
    public.close()
    sizes = {
        "lookup_test_split": _write_table(tables, "nevis_lookup_table_test", zip(*data["test"], strict=True)),
        "lookup_whole_dataset": _write_table(
            tables, "nevis_lookup_table_all", (p for s in SPLITS for p in zip(*data[s], strict=True))
        ),
    }
    chance = 1.0 - 1.0 / (task.num_classes or 2)
    salted = make_runner(import_paths=[str(fixtures), str(tables)], NEVIS_SPLIT_SALT=SALT)
    found = []
    for name, size in sizes.items():
        route = f"salted splits, {size} labels"
        try:
            run = salted.start(RunRequest(stream=stream, learner=f"nevis_lookup_learners:{name}", budget=budget))
        except Exception as exc:  # noqa: BLE001 - a failed run is an outcome, and not the one expected
            found.append({"name": name, "route": route, "outcome": f"failed: {exc}", "finding": "unexpected error"})
            continue
        with salted.sessions() as session:
            result = session.scalars(select(TaskResult).where(TaskResult.submission_id == run)).one()
            error, marked, jump = result.error, bool(result.inconsistent), result.consistency_jump
        near_chance = error >= chance - NEAR_CHANCE
        finding = "" if marked or (near_chance and name == "lookup_test_split") else "a carried table scored unmarked"
        found.append(
            {
                "name": name,
                "route": route,
                "outcome": f"E = {error:.3f} (chance {chance:.2f}), consistency jump "
                f"{'-' if jump is None else f'{jump:.2f}'}: {'marked inconsistent' if marked else 'not marked'}",
                "finding": finding,
            }
        )
    salted.close()
    return found


__all__ = ["NEAR_CHANCE", "SALT", "lookup_adversaries"]
