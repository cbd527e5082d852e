"""The study's bookkeeping around runs, with a stand-in for the StreamRunner (no Ray, no
database): ids recorded before a point runs, finished points skipped, started ones resumed,
nothing created for a bad learner, a plan that disagrees with the database refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.core.budget import RunBudget
from services.core.errors import TaskFailedError, UnknownNameError
from workers.trainer.study import StudyRunner
from workers.trainer.study_plan import StudyPlanError, make_grid, read_plan


class FakeRunner:
    """What StudyRunner asks of a StreamRunner, kept in memory."""

    def __init__(self, *, known=("indep", "ft_prev"), stop_at: int | None = None) -> None:
        self.settings = SimpleNamespace(database_url="sqlite:///fake.sqlite")
        self.known = known
        self.stop_at = stop_at  # run(id) raises KeyboardInterrupt for this id, once
        self.submissions: dict[int, dict] = {}
        self.ran: list[int] = []

    def learner(self, spec: str, budget: RunBudget):
        if spec not in self.known:
            raise UnknownNameError(f"Unknown learner {spec!r}.")
        return None, None

    def create(self, request) -> int:
        sid = 100 + len(self.submissions)
        self.submissions[sid] = {"request": request, "status": "queued"}
        return sid

    def run(self, sid: int) -> None:
        self.ran.append(sid)
        if sid == self.stop_at:
            self.stop_at = None
            raise KeyboardInterrupt
        if self.submissions[sid]["request"].learner == "broken":
            raise TaskFailedError("Task 1 (x) failed: all 1 trials failed")
        self.submissions[sid]["status"] = "succeeded"

    def plan(self, sid: int):
        if sid not in self.submissions:
            raise UnknownNameError(f"No run with id {sid} in this database.")
        request = self.submissions[sid]["request"]
        return SimpleNamespace(
            status=self.submissions[sid]["status"],
            learner_spec=request.learner,
            manifest=SimpleNamespace(name="mini"),
            phase=request.phase,
            budget=request.budget,
        )


def _grid(learners: str = "indep,ft_prev", budgets: str = "1x3,2x3"):
    return make_grid(stream="mini", phase="meta_test", learners=learners, budgets=budgets, seeds="0")


def _run(runner: FakeRunner, folder, grid=None):
    study = StudyRunner(runner, folder)
    return study.run(study.prepare(grid or _grid()))


def test_every_point_is_a_run_and_a_rerun_skips_them_all(tmp_path) -> None:
    runner = FakeRunner()
    first = _run(runner, tmp_path)
    assert first.created == (100, 101, 102, 103) and first.resumed == () and first.skipped == ()
    assert [runner.submissions[s]["request"].budget.trials for s in first.created] == [1, 1, 2, 2]
    assert [p.submission_id for p in read_plan(tmp_path).points] == [100, 101, 102, 103]
    again = _run(runner, tmp_path)
    assert again.created == () and again.resumed == () and again.skipped == (100, 101, 102, 103)
    assert len(runner.submissions) == 4 and runner.ran == [100, 101, 102, 103]


def test_an_interrupted_point_is_resumed_not_recreated(tmp_path) -> None:
    runner = FakeRunner(stop_at=101)
    with pytest.raises(KeyboardInterrupt):
        _run(runner, tmp_path)
    assert [p.submission_id for p in read_plan(tmp_path).points] == [100, 101, None, None]
    again = _run(runner, tmp_path)
    assert again.skipped == (100,) and again.resumed == (101,) and again.created == (102, 103)


def test_a_grown_grid_runs_only_the_new_points(tmp_path) -> None:
    runner = FakeRunner()
    _run(runner, tmp_path, _grid(budgets="1x3"))
    grown = _run(runner, tmp_path, _grid(budgets="1x3,2x3"))
    assert grown.skipped == (100, 101) and grown.created == (102, 103)


def test_an_unknown_learner_stops_the_study_before_any_run(tmp_path) -> None:
    runner = FakeRunner()
    with pytest.raises(UnknownNameError, match="ft_dd"):
        _run(runner, tmp_path, _grid("indep,ft_dd"))
    assert runner.submissions == {} and not (tmp_path / "study.json").exists()


def test_a_plan_that_is_not_this_database_s_is_refused(tmp_path) -> None:
    _run(FakeRunner(), tmp_path)
    with pytest.raises(StudyPlanError, match="names run 100, which this database cannot give"):
        _run(FakeRunner(), tmp_path)  # another database: no run 100
    other = FakeRunner()
    for learner in ("ft_prev", "indep", "indep", "ft_prev"):  # ids 100..103, learners swapped
        other.create(SimpleNamespace(learner=learner, phase="meta_test", budget=RunBudget(trials=1, steps=3)))
    with pytest.raises(StudyPlanError, match="says run 100 is indep 1x3 seed 0 on mini .* it is ft_prev"):
        _run(other, tmp_path)


def test_a_failed_point_names_itself_and_how_to_retry(tmp_path) -> None:
    runner = FakeRunner(known=("indep", "broken"))
    with pytest.raises(
        TaskFailedError, match="Study point broken 1x3 seed 0 \\(run 101\\) failed.*rerun the same command"
    ):
        _run(runner, tmp_path, _grid("indep,broken"))
