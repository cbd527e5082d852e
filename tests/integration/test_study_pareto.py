"""``nevis study pareto`` end to end on ``mini`` (real Ray, SQLite): every point is a run,
a rerun runs nothing, and the tables and offline figures are written."""

from __future__ import annotations

import csv
import json
import re

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.store.db import sessions_on
from services.store.db.models import Submission, TaskRun

pytestmark = pytest.mark.usefixtures("ray_local")

# The fast learners (the small CNN): `indep` and `ft_prev` are the paper's ResNet-34 baselines.
# One budget: the grid's order over budgets and seeds is test_study_plan.py's; here two runs
# show that each point is a run, a rerun runs nothing, and the report is written; the
# meta-train phase (3 of mini's 5 tasks) is the cheaper run that shows it.
COMMAND = [
    "study",
    "pareto",
    "--stream",
    "mini",
    "--learners",
    "indep_small,ft_prev_small",
    "--budgets",
    "1x3",
    "--seeds",
    "0",
    "--phase",
    "meta_train",
]


def _counts() -> tuple[int, int]:
    with sessions_on(get_settings().database_url)() as session:
        return (session.scalar(select(func.count(Submission.id))), session.scalar(select(func.count(TaskRun.id))))


def _without_plotly_js(html: str) -> str:
    """The page less the inlined plotly.js bundle (its largest script), whose built-in
    defaults name map-tile and topojson CDNs that scatter and bar plots never load."""
    scripts = re.findall(r"<script[^>]*>.*?</script>", html, flags=re.S)
    return html.replace(max(scripts, key=len), "")


def test_the_study_runs_every_point_once_and_writes_its_report(settings_env, tmp_path) -> None:
    out = tmp_path / "study"
    cli = CliRunner()
    first = cli.invoke(app, [*COMMAND, "--out", str(out)])
    assert first.exit_code == 0, first.output + repr(first.exception)
    plan = json.loads((out / "study.json").read_text())
    ids = [p["submission_id"] for p in plan["points"]]
    assert len(ids) == 2 and len(set(ids)) == 2 and None not in ids
    assert [(p["learner"], p["budget"]) for p in plan["points"]] == [("indep_small", "1x3"), ("ft_prev_small", "1x3")]
    counts = _counts()
    assert counts == (2, 2 * 3)  # mini: 3 meta-train tasks per run, each committed at the first attempt

    again = cli.invoke(app, [*COMMAND, "--out", str(out)])
    assert again.exit_code == 0, again.output + repr(again.exception)
    assert "0 new, 0 resumed, 2 already finished" in again.output
    assert [p["submission_id"] for p in json.loads((out / "study.json").read_text())["points"]] == ids
    assert _counts() == counts

    with open(out / "points.csv") as handle:
        points = list(csv.DictReader(handle))
    assert [int(p["submission_id"]) for p in points] == ids
    assert all(
        p["status"] == "succeeded" and p["tasks"] == "3" and 0 <= float(p["E"]) <= 1 and float(p["cFLOP"]) > 0
        for p in points
    )
    with open(out / "aggregate.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 2
    for name in ("pareto", "regret", "slices"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        html = (out / f"{name}.html").read_text()
        assert not re.search(r"<(script|link)[^>]*\b(src|href)=[\"']?https?:", html)
        assert "cdn." not in _without_plotly_js(html)


def test_a_changed_grid_or_a_bad_list_is_refused_before_any_run(settings_env, tmp_path) -> None:
    cli = CliRunner()
    bad = cli.invoke(
        app,
        ["study", "pareto", "--stream", "mini", "--learners", "indep", "--budgets", "3x", "--out", str(tmp_path / "a")],
    )
    assert bad.exit_code != 0 and "TRIALSxSTEPS" in str(bad.exception)
    unknown = cli.invoke(
        app,
        [
            "study",
            "pareto",
            "--stream",
            "mini",
            "--learners",
            "indep,ft_prevv",
            "--budgets",
            "1x3",
            "--out",
            str(tmp_path / "b"),
        ],
    )
    assert "ft_prevv" in str(unknown.exception) and "ft_prev" in str(unknown.exception)
    assert not (tmp_path / "b" / "study.json").exists()
