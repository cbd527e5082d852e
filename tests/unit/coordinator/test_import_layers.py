"""The scheduler package never imports the worker harness (which imports the scheduler)."""

from __future__ import annotations

import ast
from pathlib import Path

SCHEDULER = Path(__file__).resolve().parents[3] / "services" / "coordinator" / "scheduler"


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_scheduler_module_imports_the_worker() -> None:
    offenders = {
        path.name: sorted(n for n in _imported(path) if n.startswith("services.coordinator.worker"))
        for path in SCHEDULER.glob("*.py")
    }
    assert not {name: found for name, found in offenders.items() if found}


def test_the_retry_policy_comes_from_the_scheduler_policy(tmp_path) -> None:
    from services.coordinator.common.config import CoordinatorSettings
    from services.coordinator.scheduler.policy import RetryPolicy, retry_policy

    settings = CoordinatorSettings(
        data_dir=tmp_path, database_url="sqlite://", max_attempts=4, backoff_base_s=2, backoff_max_s=30
    )
    assert retry_policy(settings) == RetryPolicy(4, 2.0, 30.0)
