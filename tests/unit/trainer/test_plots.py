"""The run plot shows every committed task, the phases, E and cumulative FLOPs."""

from __future__ import annotations

from services.store.runs.summary import RunSummary, TaskRow
from workers.trainer.plots import run_figure, write_run_plot


def _row(order: int, phase: str, error: float | None, flops: float) -> TaskRow:
    return TaskRow(
        order=order,
        dataset=f"shapes:t{order}",
        year=2000 + order,
        phase=phase,
        status="committed" if error is not None else "pending",
        error=error,
        split="test",
        flops=flops,
        retried_flops=0.0,
        trials=2,
        failed_trials=0,
        best_config=None,
        wall_time_s=1.0,
    )


def test_figure_has_one_bar_per_committed_task_and_cumulative_flops(tmp_path) -> None:
    summary = RunSummary(
        submission_id=7,
        learner="indep",
        stream="mini",
        stream_version="1.0",
        phase="meta_test",
        status="running",
        message=None,
        tasks=(_row(1, "meta_train", 0.5, 10.0), _row(2, "meta_test", 0.25, 30.0), _row(3, "meta_test", None, 0.0)),
        mean_error=0.25,
        headline_tasks=2,
        cflop=40.0,
        retried_flops=0.0,
        flops_sources=("measured",),
    )
    fig = run_figure(summary)
    bars = [t for t in fig.data if t.type == "bar"]
    assert {t.name: list(t.y) for t in bars} == {"meta-train": [0.5], "meta-test": [0.25]}
    line = next(t for t in fig.data if t.type == "scatter")
    assert list(line.y) == [10.0, 40.0] and list(line.x) == ["1. shapes:t1", "2. shapes:t2"]
    assert "E = 0.2500" in str(fig.layout.annotations)
    html = write_run_plot(summary, tmp_path / "run.html").read_text()
    assert "shapes:t2" in html and "cFLOP 4.000e+01" in html
