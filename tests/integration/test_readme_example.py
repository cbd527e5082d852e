"""The example learner printed in the README runs, as printed, over a tiny stream."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.core.budget import RunBudget
from services.core.config import get_settings
from services.store.runs.summary import load_summary
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_learner_source() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    matching = [b for b in blocks if "def make()" in b and "class " in b]
    assert len(matching) == 1, "the README must hold exactly one example learner"
    return matching[0]


def test_readme_learner_is_short_and_complete() -> None:
    source = readme_learner_source()
    assert len(source.strip().splitlines()) < 80
    for method in (
        "search_space",
        "resources",
        "init_state",
        "train",
        "predict",
        "features",
        "save_predictor",
        "load_predictor",
    ):
        assert f"def {method}(" in source


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the README's own set-up: SQLite
def test_readme_learner_runs_over_a_stream(
    learner_dir: Path, settings_env, database_url, monkeypatch, tiny_stream
) -> None:
    (learner_dir / "readme_learner.py").write_text(readme_learner_source())
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    runner = StreamRunner(get_settings())
    budget = RunBudget(trials=2, steps=5, checkpoint_fractions=(0.0, 1.0))
    run_id = runner.start(RunRequest(stream=str(tiny_stream), learner="readme_learner:make", budget=budget))
    with runner.sessions() as session:
        summary = load_summary(session, submission_id=run_id)
    assert summary.status == "succeeded"
    assert [t.status for t in summary.tasks] == ["committed"] * 3
    assert summary.flops_sources == ("measured",) and summary.cflop > 0
    # A linear model on 16x16x3 inputs: 2 * 768 * K FLOPs per image forward, so at least
    # the evaluation of the test split (240 images) must be in each task's FLOPs.
    for task, k in zip(summary.tasks, (4, 6, 4)):
        assert task.flops >= 2 * 768 * k * 240
