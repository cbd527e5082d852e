"""Transfer on repeats (NEVIS'22 §5.2) over real runs: FT-d and Indep (the ``_small`` learners,
same budget) on a tiny stream whose first dataset comes back as a meta-test task, in SQLite.

Checked: the read model's numbers are the stored ones (errors of both runs, FT-d's record in
its committed state, the source's size in the dataset index); ``nevis results --json`` carries
the same report; the submission page, in a real headless Chromium, renders the repeats table,
the transfer matrix and the resolution slices with those numbers, and the Indep run's page says
why it has neither an Indep to compare with nor a matrix.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from services.cli.main import app as cli
from services.coordinator.common.config import CoordinatorSettings
from services.core.budget import RunBudget
from services.core.config import Settings, get_settings
from services.core.transfer import resolution_bucket
from services.dashboard.server import create_server_app
from services.store.db import sessions_on, upgrade
from services.store.objects import open_store
from services.store.runs import records
from services.store.runs.summary import load_summary
from services.store.runs.transfer import NO_INDEP, transfer_report
from tests.support.browser import headless_chromium, served
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

BUDGET = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,))
RULE = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
TASKS = [(2004, "shapes:shape", "single", 4), (2012, "shapes:hue", "single", 6), (2020, "shapes:shape", "single", 4)]


def repeated_stream(path: Path) -> Path:
    """Three tasks; the first task's dataset comes back as the third (a meta-test task)."""
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "name": "tiny-repeat",
                "version": "test-1",
                "description": "a repeated dataset",
                "source": "tests",
                "meta_test_from_year": 2019,
                "image_size": 16,
                "tasks": [
                    {
                        "order": i + 1,
                        "year": year,
                        "dataset": key,
                        "title": key,
                        "domain": "shape",
                        "kind": kind,
                        "num_classes": k,
                        "split": RULE,
                    }
                    for i, (year, key, kind, k) in enumerate(TASKS)
                ],
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_local) -> tuple[Settings, int, int]:
    """(settings, FT-d run, Indep run), both finished, same stream version and budget."""
    root = tmp_path_factory.mktemp("transfer")
    url = f"sqlite:///{root / 'nevis.sqlite'}"
    upgrade(url)
    settings = Settings(data_dir=root / "data", database_url=url)
    runner = StreamRunner(settings)
    stream = str(repeated_stream(root / "tiny-repeat.json"))
    ft_d, indep = (
        runner.start(RunRequest(stream=stream, learner=name, budget=BUDGET)) for name in ("ft_d_small", "indep_small")
    )
    return settings, ft_d, indep


def _report(settings: Settings, submission_id: int):
    store = open_store(settings.store_url)
    with sessions_on(settings.database_url)() as session:
        return transfer_report(session, store, submission_id=submission_id), load_summary(
            session, submission_id=submission_id
        )


def test_the_report_holds_the_stored_errors_choices_and_source_sizes(runs):
    settings, ft_d, indep = runs
    report, summary = _report(settings, ft_d)
    _, theirs = _report(settings, indep)
    errors = {t.order: t.error for t in summary.tasks}
    [repeat] = report.repeats
    assert (repeat.dataset, repeat.first, repeat.later) == ("shapes:shape", 1, 3)
    assert (repeat.first_error, repeat.later_error) == (errors[1], errors[3])
    assert report.indep_submission_id == indep and repeat.indep_error == theirs.tasks[2].error
    assert repeat.vs_indep == pytest.approx(errors[3] - theirs.tasks[2].error)
    with sessions_on(settings.database_url)() as session:
        key = records.last_state_key(session, submission_id=ft_d)
    state = pickle.loads(open_store(settings.store_url).get_bytes(key))  # the test trusts its own run
    assert sorted(report.choices) == [2, 3] == sorted(state)
    for order, choice in report.choices.items():
        assert (choice.chosen, choice.knn_errors, choice.fresh_error) == (
            state[order]["chosen"],
            state[order]["knn_error"],
            state[order]["fresh_error"],
        )
    assert report.choices[3].knn_errors.keys() == {1, 2}
    sides = set(report.source_sides.values())
    assert len(sides) == 1 and isinstance(next(iter(sides)), int)  # shapes: one generated size
    [meta_test] = report.slices
    assert (meta_test.bucket, meta_test.tasks) == (resolution_bucket(sides.pop()), 1)
    assert meta_test.mean_error == errors[3] and meta_test.indep_mean_error == theirs.tasks[2].error
    own, _ = _report(settings, indep)  # the Indep run itself: no other Indep, no choices
    assert own.indep_submission_id is None and own.indep_reason == NO_INDEP
    assert own.choices == {} and "recorded no choices" in own.choices_reason


def test_nevis_results_json_carries_the_report(runs, monkeypatch):
    settings, ft_d, _ = runs
    monkeypatch.setenv("NEVIS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("NEVIS_DATABASE_URL", settings.database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["results", str(ft_d), "--json"])
        text = CliRunner().invoke(cli, ["results", str(ft_d)])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["transfer"]
    report, _ = _report(settings, ft_d)
    assert shown == json.loads(json.dumps(report.to_dict()))
    assert shown["transfer_matrix"]["recorded_by"].startswith("the learner")
    assert text.exit_code == 0, text.output
    assert f"Repeated datasets (against Indep #{report.indep_submission_id})" in text.output
    assert "the learner's own record" in text.output and "3←task" in text.output


@pytest.fixture(scope="module")
def server(runs) -> Iterator[str]:
    settings, _, _ = runs
    with served(
        create_server_app(CoordinatorSettings(data_dir=settings.data_dir, database_url=settings.database_url))
    ) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with headless_chromium() as driver:
        yield driver


def _drawn(browser, *ids: str) -> None:
    WebDriverWait(browser, 30).until(lambda d: all(d.find_elements(By.CSS_SELECTOR, f"#{i}[data-drawn]") for i in ids))


def test_the_submission_page_shows_repeats_matrix_and_resolution_slices(browser, server, runs):
    settings, ft_d, indep = runs
    report, _ = _report(settings, ft_d)
    browser.get(f"{server}/submissions/{ft_d}")
    _drawn(browser, "repeats", "transfer_matrix", "resolution")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#repeats-table tbody tr")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    repeat = report.repeats[0]
    assert cells[:5] == ["shapes:shape", "1", "3", f"{repeat.first_error:.4f}", f"{repeat.later_error:.4f}"]
    assert cells[6] == f"{repeat.indep_error:.4f}"
    assert f"#{indep}" in browser.find_element(By.ID, "repeats-indep").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#transfer-table tbody tr")
    assert [(int(r.get_attribute("data-task")), int(r.get_attribute("data-chosen"))) for r in rows] == [
        (t, c.chosen) for t, c in sorted(report.choices.items())
    ]
    plotted = browser.execute_script("return document.getElementById('transfer_matrix').data[0].z")
    _, _, cells_expected = report.matrix()
    assert plotted == [[pytest.approx(v) if v is not None else None for v in row] for row in cells_expected]
    slices = browser.execute_script("return document.getElementById('resolution').data.map(t => t.y)")
    assert slices == [
        [pytest.approx(s.mean_error) for s in report.slices],
        [pytest.approx(s.indep_mean_error) for s in report.slices],
    ]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    download = browser.execute_script("return fetch(document.getElementById('transfer-json').href).then(r => r.json())")
    assert download == {"submission_id": ft_d, **json.loads(json.dumps(report.to_dict()))}
    missing = browser.execute_script("return fetch('/submissions/999999/transfer.json').then(r => r.status)")
    assert missing == 404
    browser.get(f"{server}/submissions/{indep}")
    _drawn(browser, "repeats", "resolution")
    assert NO_INDEP in browser.find_element(By.ID, "repeats-indep").text
    assert "recorded no choices" in browser.find_element(By.ID, "matrix-none").text
