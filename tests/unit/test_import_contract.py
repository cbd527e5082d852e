"""The import contract (pyproject's [tool.importlinter]) holds, and it would catch a breach.

Layers run one way, lowest first: core, store, stream, learners | ingest, sandbox, trainer |
probe (each pair independent of each other), coordinator, cli; the offline ingest chain
(workers.ingest: fetch, read, write) is never imported by the trainer, probe pool or sandbox;
no sibling packages import each other in a cycle; harness code never imports learner code
(only the sandboxed learner host does); the coordinator, dashboard and CLI read probe results
through the store (services.store.probes); the probe pool's runtime sits on its pure metrics
and fits (workers.probe.runtime above workers.probe.scores | workers.probe.fits).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    if not LINT.exists():
        pytest.fail(f"lint-imports is not installed beside {sys.executable}: run scripts/setup.sh")
    return subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=where,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_the_import_contract_is_kept() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


def _copy_tree(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for package in ("services", "workers"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # accounting reaching up into the trainer: a wrong-way import
        ("services/store/runs/records.py", "import workers.trainer.task_job", "One-way layers"),
        # the trainer and the probe pool are independent of each other
        ("workers/probe/runtime/pool.py", "import workers.trainer.stream_runner", "One-way layers"),
        # a cycle between two packages of one layer
        ("services/store/db/types.py", "import services.store.runs.records", "No import cycles"),
        # harness code importing a learner: only the sandboxed learner host may
        ("workers/probe/runtime/jobs.py", "import workers.learners.loading", "Harness code never imports"),
        # a view reading probe results from the pool instead of the store
        ("services/dashboard/pages.py", "import workers.probe.runtime.jobs", "read probe results through the store"),
        # the trainer reaching into the offline ingest chain (readers, sources, writers)
        ("workers/trainer/__init__.py", "import workers.ingest.readers.convert", "ingest chain"),
    ],
)
def test_a_wrong_way_import_breaks_the_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    copy = _copy_tree(tmp_path)
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # injected by the test\n")
    result = _lint(copy)
    assert result.returncode != 0, result.stdout
    assert f"{broken}" in result.stdout.split("Broken contracts", 1)[-1], result.stdout


def test_a_runs_driver_does_not_import_torch() -> None:
    """The coordinator starts a worker process per task, and each imports the stream runner:
    torch there cost every task 2 s of imports (and ~300 MB) for code that never trains.
    Learner hosts import torch; the driver reads checkpoints' provenance lazily."""
    code = (
        "import sys\n"
        "import services.coordinator.worker, workers.trainer.stream_runner, services.cli.run_cmd\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"torch modules imported by a run's driver: {result.stdout[:400]}"


def test_a_learner_host_does_not_import_pydantic() -> None:
    """Every run starts learner hosts on its critical path (one per executor and one that
    predicts; a coordinator task starts them again): the budget's pydantic model cost each
    0.1–0.16 s of imports for one tuple of checkpoint fractions."""
    code = (
        "import sys\n"
        "import workers.sandbox.host\n"
        "from workers.learners.loading import load_learner\n"
        "load_learner('indep_small')\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m == 'services.core.budget'))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"imported by a learner host: {result.stdout[:400]}"
