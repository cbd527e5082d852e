"""``nevis check`` finds each of five broken learners at the call that is broken, and passes the
README's learner as ``nevis init learner`` writes it (the template is that learner, word for word).

The broken learners (tests/integration/learner_fixtures/nevis_broken_learners.py) run through
the check's driver in-process; the working one through the real ``nevis init`` and ``nevis
check`` commands. Each check starts real sandboxed learner hosts.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.check import diagnosis as dx
from services.cli.check.calls import CheckRun
from services.cli.learner_template import LEARNER
from services.cli.main import app

FIXTURE = Path(__file__).parent / "learner_fixtures" / "nevis_broken_learners.py"
BROKEN = [  # factory, the call the check must stop at, words its message must hold
    ("wrong_shape", dx.PREDICT, "shape (32, 3); expected finite (32, 4)"),
    ("unpicklable", dx.ROUND_TRIP, "pickle"),
    ("raising_load", dx.ROUND_TRIP, "weights file not found"),
    ("missing_method", dx.LOAD, "lacks features"),
    ("nan_loss", dx.TRAIN, "not finite"),
]


def _readme_learner() -> str:
    spec = importlib.util.spec_from_file_location(
        "_nevis_readme_example", Path(__file__).parent / "test_readme_example.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.readme_learner_source()


@pytest.fixture(scope="module")
def broken_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("broken")
    shutil.copy(FIXTURE, folder / FIXTURE.name)
    return folder


@pytest.mark.parametrize(("factory", "call", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_check_stops_at_the_broken_call_with_its_fix(broken_folder: Path, factory: str, call: str, words: str) -> None:
    checked = CheckRun(broken_folder, f"nevis_broken_learners:{factory}", steps=4)
    outcomes = checked.run()
    failed = [o for o in outcomes if o.status == "FAIL"]
    assert len(failed) == 1 and failed[0] is outcomes[-1], outcomes
    assert failed[0].call == call, outcomes[-1]
    assert words in failed[0].detail
    expected_fix = dx.LOSS_FIX if factory == "nan_loss" else dx.fix_for(call, failed[0].detail)
    assert failed[0].fix == expected_fix
    assert all(o.status in ("ok", "warn") for o in outcomes[:-1])
    if factory == "raising_load":  # what the learner printed, then the failed call's traceback
        output = checked.output.decode()
        printed, raised = output.find("looking for the weights"), output.find("RuntimeError: weights file not found")
        assert 0 <= printed < raised and "Traceback" in output, output


def test_a_broken_check_shows_the_end_of_the_learner_s_output() -> None:
    from rich.console import Console

    from services.cli.check_cmd import show_output

    console = Console(record=True, width=100)
    show_output(console, b"".join(b"line %d\n" % i for i in range(100)) + b"[not markup]", lines=3)
    shown = console.export_text()
    assert "last 3 of 101 lines" in shown and "line 99\n[not markup]" in shown and "line 97" not in shown


def test_init_writes_the_readme_learner_and_check_passes_it(tmp_path: Path, monkeypatch) -> None:
    assert _readme_learner() == LEARNER, "the template is the README's learner, word for word"
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(app, ["init", "learner", "my-first-learner"])
    assert made.exit_code == 0, made.output
    folder = tmp_path / "my-first-learner"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "my_first_learner.py", "test_my_first_learner.py"]
    compile((folder / "test_my_first_learner.py").read_text(), "test", "exec")
    assert "nevis check . --entrypoint my_first_learner:make" in (folder / "README.md").read_text()
    again = runner.invoke(app, ["init", "learner", "my-first-learner"])
    assert again.exit_code != 0 and "exists already" in str(again.exception)

    checked = runner.invoke(app, ["check", str(folder), "--entrypoint", "my_first_learner:make", "--steps", "4"])
    assert checked.exit_code == 0, checked.output
    for call in dx.CALLS:
        assert call in checked.output
    assert "FAIL" not in checked.output and "Every protocol call works" in checked.output

    broken = runner.invoke(app, ["check", str(folder), "--entrypoint", "my_first_learner:nothing"])
    assert broken.exit_code == 1 and "fix (load)" in broken.output
