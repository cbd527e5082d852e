"""The Pareto study's table and figures, on hand-made results (no database, no Ray)."""

from __future__ import annotations

import csv
import json
import re
import statistics

import pytest

from services.core.metrics import pareto_front
from services.dashboard.static_png import to_matplotlib
from services.dashboard.study_figures import (
    SIZE_BINS,
    pareto_figure,
    regret_curves,
    regret_figure,
    size_bin,
    slice_table,
    slices_figure,
    study_figures,
    write_figures,
)
from services.dashboard.study_report import PointResult, TaskPoint, aggregate, point_result, write_tables
from workers.trainer.study_plan import make_grid, merge_plan

# Four tasks: two meta-train, two meta-test (the headline tasks of a meta_test run).
TASKS = (
    (1, "digits", "meta_train", "ocr", 1078),
    (2, "shape", "meta_train", "shape", 720),
    (3, "multi", "meta_test", "shape", 720),
    (4, "scale", "meta_test", "scale", 12_000),
)


def _point(
    learner: str, budget: str, seed: int, errors: tuple[float, ...], cflop: float, status: str = "succeeded"
) -> PointResult:
    trials, steps = (int(n) for n in budget.split("x"))
    rows = tuple(
        TaskPoint(order=o, dataset=d, phase=ph, domain=dom, train_size=n, error=e)
        for (o, d, ph, dom, n), e in zip(TASKS, errors, strict=True)
    )
    headline = [e for (_, _, ph, _, _), e in zip(TASKS, errors, strict=True) if ph == "meta_test"]
    return PointResult(
        learner=learner,
        budget=budget,
        trials=trials,
        steps=steps,
        seed=seed,
        submission_id=None,
        status=status,
        phase="meta_test",
        mean_error=statistics.fmean(headline),
        cflop=cflop,
        tasks=2,
        headline_tasks=2,
        task_rows=rows,
    )


POINTS = [
    _point("indep", "1x3", 0, (0.5, 0.5, 0.4, 0.6), 10.0),
    _point("indep", "1x3", 1, (0.5, 0.5, 0.5, 0.6), 12.0),
    _point("indep", "2x3", 0, (0.4, 0.4, 0.3, 0.5), 20.0),
    _point("indep", "2x3", 1, (0.4, 0.4, 0.3, 0.5), 20.0),
    _point("ft_prev", "1x3", 0, (0.5, 0.3, 0.2, 0.4), 11.0),
    _point("ft_prev", "1x3", 1, (0.5, 0.3, 0.4, 0.4), 11.0),
    _point("ft_prev", "2x3", 0, (0.4, 0.3, 0.4, 0.5), 25.0),  # dearer and worse: off ft_prev's front
    _point("ft_prev", "2x3", 1, (0.4, 0.3, 0.4, 0.5), 25.0),
]


def test_aggregates_are_the_mean_and_sample_std_of_e_over_seeds() -> None:
    rows = {(r.learner, r.budget): r for r in aggregate(POINTS)}
    assert list(rows) == [("indep", "1x3"), ("indep", "2x3"), ("ft_prev", "1x3"), ("ft_prev", "2x3")]
    first = rows[("indep", "1x3")]
    assert first.seeds == 2 and first.mean_error == pytest.approx(0.525)
    assert first.std_error == pytest.approx(statistics.stdev([0.5, 0.55]))
    assert first.mean_cflop == pytest.approx(11.0)
    assert rows[("indep", "2x3")].std_error == pytest.approx(0.0)
    half = 12.706204736 * statistics.stdev([0.5, 0.55]) / 2**0.5  # t(0.975, 1 df) * SD / sqrt(2)
    assert (first.ci_low, first.ci_high) == pytest.approx((0.525 - half, 0.525 + half))
    assert [r.on_front for r in rows.values()] == [True, True, True, False]


def test_a_single_seed_has_no_spread_and_unfinished_points_are_left_out() -> None:
    running = PointResult(
        learner="indep",
        budget="4x3",
        trials=4,
        steps=3,
        seed=0,
        submission_id=9,
        status="running",
        phase="meta_test",
        mean_error=0.1,
        cflop=5.0,
        tasks=1,
        headline_tasks=2,
    )
    rows = aggregate([POINTS[0], running])
    assert len(rows) == 1 and rows[0].seeds == 1 and rows[0].std_error is None and rows[0].on_front
    assert (rows[0].ci_low, rows[0].ci_high) == (None, None)
    assert "no interval over seeds" in pareto_figure(rows, title="t").layout.title.text


def test_the_pareto_plot_holds_each_learners_points_error_bars_and_front() -> None:
    rows = aggregate(POINTS)
    figure = pareto_figure(rows, title="t")
    traces = {t.name: t for t in figure.data}
    indep, ft_prev = traces["indep"], traces["ft_prev"]
    assert list(indep.x) == [11.0, 20.0] and list(indep.y) == pytest.approx([0.525, 0.4])
    assert list(indep.text) == ["1x3", "2x3"]
    assert list(indep.error_y.array) == pytest.approx([r.ci_high - r.mean_error for r in rows if r.learner == "indep"])
    assert (
        indep.error_y.array[0] > statistics.stdev([0.5, 0.55]) and indep.error_y.array[1] == 0.0
    )  # t interval, not SD
    assert "Student t 95 % interval" in figure.layout.title.text
    assert indep.marker.color != ft_prev.marker.color
    # The drawn front is exactly the non-dominated set of the learner's points.
    for learner in ("indep", "ft_prev"):
        mine = [r for r in rows if r.learner == learner]
        flags = pareto_front([(r.mean_cflop, r.mean_error) for r in mine])
        expected = sorted((r.mean_cflop, r.mean_error) for r, f in zip(mine, flags, strict=True) if f)
        front = traces[f"{learner} front"]
        assert list(front.x) == [x for x, _ in expected] and list(front.y) == pytest.approx([y for _, y in expected])
    assert traces["ft_prev front"].x == (11.0,)
    assert figure.layout.xaxis.type == "log"


def test_regret_is_against_indep_of_the_same_budget_and_seed_averaged_over_seeds() -> None:
    whole = regret_curves(POINTS, meta_test_only=False)
    tasks, curve = whole[("ft_prev", "1x3")]
    assert [t.order for t in tasks] == [1, 2, 3, 4]
    # seed 0: diffs 0, -0.2, -0.2, -0.2; seed 1: 0, -0.2, -0.1, -0.2 → cumulated, then averaged
    assert curve == pytest.approx([0.0, -0.2, -0.35, -0.55])
    tasks, curve = regret_curves(POINTS, meta_test_only=True)[("ft_prev", "2x3")]
    assert [t.order for t in tasks] == [3, 4] and curve == pytest.approx([0.1, 0.1])
    assert all(learner != "indep" for learner, _ in whole)
    figure = regret_figure(POINTS, title="t")
    drawn = {(t.name, t.xaxis): list(t.y) for t in figure.data}
    assert drawn[("ft_prev 1x3", "x2")] == pytest.approx([0.0, -0.2, -0.35, -0.55])
    assert drawn[("ft_prev 1x3", "x")] == pytest.approx([-0.15, -0.35])  # summed from task 3


def test_without_indep_the_regret_plot_says_why_it_is_empty() -> None:
    figure = regret_figure([p for p in POINTS if p.learner != "indep"], title="t")
    assert not figure.data
    assert "add indep to --learners" in str(figure.layout.annotations)


@pytest.mark.parametrize(
    ("size", "label"),
    [(None, "unknown"), (0, "< 1k"), (999, "< 1k"), (1_000, "1k – 10k"), (99_999, "10k – 100k"), (100_000, "≥ 100k")],
)
def test_training_set_sizes_fall_in_four_fixed_bins(size, label) -> None:
    assert size_bin(size) == label and len(SIZE_BINS) == 4


def test_slices_average_the_headline_tasks_per_domain_and_size_over_seeds() -> None:
    by_domain = slice_table(POINTS, lambda t: t.domain or "unknown")
    assert by_domain[("indep", "1x3")]["shape"] == pytest.approx((0.45, statistics.stdev([0.4, 0.5])))
    assert set(by_domain[("indep", "1x3")]) == {"shape", "scale"}  # meta-train tasks are not headline
    figure = slices_figure(POINTS, title="t")
    bars = {(t.name, t.xaxis): dict(zip(t.x, t.y, strict=True)) for t in figure.data}
    assert bars[("ft_prev 2x3", "x")] == pytest.approx({"scale": 0.5, "shape": 0.4})
    assert bars[("ft_prev 2x3", "x2")] == pytest.approx({"< 1k": 0.4, "10k – 100k": 0.5})


def test_tables_are_written_as_csv_and_json(tmp_path) -> None:
    plan = merge_plan(
        None, make_grid(stream="mini", phase="meta_test", learners="indep,ft_prev", budgets="1x3,2x3", seeds="0,1")
    )
    rows = aggregate(POINTS)
    write_tables(tmp_path, plan, POINTS, rows)
    with open(tmp_path / "points.csv") as handle:
        points = list(csv.DictReader(handle))
    assert [p["learner"] for p in points][:2] == ["indep", "indep"] and float(points[0]["E"]) == pytest.approx(0.5)
    with open(tmp_path / "aggregate.csv") as handle:
        agg = list(csv.DictReader(handle))
    assert agg[0]["E_std"] != "" and agg[3]["on_front"] == "False"
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["budgets"] == ["1x3", "2x3"] and len(doc["points"]) == 8 and len(doc["aggregate"]) == 4
    assert doc["points"][0]["per_task"][2] == {
        "order": 3,
        "dataset": "multi",
        "phase": "meta_test",
        "domain": "shape",
        "train_size": 720,
        "error": 0.4,
    }


def test_a_planned_point_has_no_numbers() -> None:
    plan = merge_plan(None, make_grid(stream="mini", phase="meta_test", learners="indep", budgets="1x3", seeds="0"))
    result = point_result(plan.points[0], None)
    assert result.status == "planned" and result.mean_error is None and not result.complete


def test_the_png_copy_draws_the_same_panels_and_points() -> None:
    pareto = to_matplotlib(pareto_figure(aggregate(POINTS), title="t"))
    (ax,) = pareto.axes
    assert ax.get_xscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["indep"].get_xdata()) == [11.0, 20.0]
    regret = to_matplotlib(regret_figure(POINTS, title="t"))
    assert [a.get_title() for a in regret.axes] == ["meta-test tasks", "whole stream"]
    slices = to_matplotlib(slices_figure(POINTS, title="t"))
    assert len(slices.axes[0].patches) == 4 * 2  # 4 (learner, budget) bars × 2 domains


def test_figures_are_written_as_offline_html_and_png(tmp_path) -> None:
    written = write_figures(tmp_path, study_figures(POINTS, aggregate(POINTS), stream="mini", phase="meta_test"))
    assert sorted(p.name for p in written) == sorted(
        f"{n}.{ext}" for n in ("pareto", "regret", "slices") for ext in ("html", "png")
    )
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            html = path.read_text()
            assert not re.search(r"<script[^>]*\bsrc=", html)  # plotly.js is inlined, nothing is fetched
