"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``,
driven by Selenium) over real runs: two runs of the real runner on ``mini`` (the ``indep``
baseline and a test learner) in a database, the server on a real socket.

Checked: the pages render, the plots hold the right points, links work, no console error,
no request leaves the machine. Screenshots go to ``build/screenshots`` (one is in the README; both in docs/operators.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from services.coordinator.common.config import CoordinatorSettings
from services.core.budget import RunBudget
from services.core.config import Settings
from services.dashboard.page_kit import cpu_seconds_text
from services.dashboard.server import create_server_app
from services.store.db import sessions_on, upgrade
from services.store.runs.board_front import front_points
from services.store.runs.summary import load_summary
from tests.support.browser import headless_chromium, served
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

SCREENSHOTS = Path(__file__).resolve().parents[3] / "build" / "screenshots"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_local) -> tuple[str, Path, list[int]]:
    """Two real runs over ``mini``: the Indep baseline and a non-baseline learner."""
    root = tmp_path_factory.mktemp("dashboard")
    url = f"sqlite:///{root / 'nevis.sqlite'}"
    upgrade(url)
    runner = StreamRunner(Settings(data_dir=root / "data", database_url=url))
    budget = RunBudget(trials=1, steps=10, checkpoint_fractions=(0.0, 1.0))
    ids = [
        runner.start(RunRequest(stream="mini", learner=learner, budget=budget))
        for learner in ("indep_small", "nevis_test_learners:nearest_mean")
    ]
    _charge_a_floor(url, ids[1])
    return url, root, ids


def _charge_a_floor(url: str, submission_id: int) -> None:
    """Mark the run's first committed task as charged the harness's CPU-time floor, as the
    runner does when a learner's FLOP count is too low for its CPU time (before the server
    starts: results are never changed after they commit, so no cache is told of this); its
    kept scores are rewritten from its results, as the runner's commit does."""
    from sqlalchemy import select

    from services.store.db import sessions_on, transaction
    from services.store.db.models import TaskResult
    from services.store.runs.scores import rescore

    with transaction(sessions_on(url)) as session:
        first = session.scalars(
            select(TaskResult).where(TaskResult.submission_id == submission_id).order_by(TaskResult.id).limit(1)
        ).one()
        first.flops_floored = True
        rescore(session, submission_ids=[submission_id])


@pytest.fixture(scope="module")
def server(runs) -> Iterator[str]:
    url, root, _ = runs
    with served(create_server_app(CoordinatorSettings(data_dir=root / "data", database_url=url))) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with headless_chromium(logs=("browser", "performance")) as driver:
        yield driver


def _open(browser, url: str, *, charts: int = 0) -> None:
    browser.get(url)
    if charts:
        WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-drawn]")) >= charts)


def _problems(browser, base: str) -> tuple[list[str], list[str]]:
    """Console errors, and requests to anywhere but the server, since the last call."""
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    foreign = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            target = message["params"]["request"]["url"]
            if urlsplit(target).scheme not in ("data", "blob") and not target.startswith(base):
                foreign.append(target)
    return errors, foreign


def test_the_leaderboard_shows_both_runs_and_their_front(browser, server, runs):
    url, _, ids = runs
    _open(browser, server + "/", charts=1)
    rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
    assert sorted(int(r.get_attribute("data-submission")) for r in rows) == sorted(ids)
    assert "baseline" in rows[[int(r.get_attribute("data-submission")) for r in rows].index(ids[0])].text
    by_id = {int(r.get_attribute("data-submission")): r for r in rows}
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")]
    assert header[header.index("cFLOP") + 1 : header.index("cFLOP") + 4] == ["cFLOP (paper)", "Profile score", "CPU s"]
    marks = {i: r.find_elements(By.CSS_SELECTOR, ".badge-floor") for i, r in by_id.items()}
    assert marks[ids[0]] == [] and [m.text for m in marks[ids[1]]] == ["floor"]
    assert "harness charged a floor" in marks[ids[1]][0].get_attribute("title")
    closed = {i: r.find_elements(By.CSS_SELECTOR, ".badge-closed") for i, r in by_id.items()}  # no code_url given
    assert closed[ids[0]] == [] and [m.text for m in closed[ids[1]]] == ["code not public"]  # the baseline's is public
    assert "no public code URL" in closed[ids[1]][0].get_attribute("title")
    assert "code not public" in browser.find_element(By.ID, "board-legend").text
    scores = {i: r.find_element(By.CSS_SELECTOR, "td.profile-score").text.split()[0] for i, r in by_id.items()}
    assert all(0.0 <= float(v) <= 1.0 for v in scores.values())
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#board-profiles[data-drawn]"))
    drawn = browser.execute_script("return document.getElementById('board-profiles').data.map(t => [t.name, t.y])")
    assert sorted(name.split()[0] for name, _ in drawn) == sorted(f"#{i}" for i in ids)  # both finished runs' curves
    assert all(min(y) >= 0.0 and max(y) <= 1.0 for _, y in drawn)
    plotted = browser.execute_script(
        "return document.getElementById('pareto').data.map(t => ({name: t.name, x: t.x, y: t.y, ids: t.customdata}))"
    )
    with sessions_on(url)() as session:
        points = {p.submission_id: p for p in front_points(session, stream="mini", version=_version(session, ids[0]))}
    markers = {i: (x, y) for trace in plotted if trace["ids"] for i, x, y in zip(trace["ids"], trace["x"], trace["y"])}
    assert markers.keys() == points.keys() == set(ids)
    for sid, (x, y) in markers.items():
        assert x == pytest.approx(points[sid].cflop) and y == pytest.approx(points[sid].mean_error)
    front = next(t for t in plotted if t["name"] == "Pareto front")
    assert len(front["x"]) == sum(p.on_front for p in points.values()) >= 1
    browser.save_screenshot(str(SCREENSHOTS / "leaderboard.png"))
    errors, foreign = _problems(browser, server)
    assert errors == [] and foreign == []


def test_sorting_downloads_and_the_api_agree(browser, server, runs):
    _, _, ids = runs
    _open(browser, server + "/?sort=cflop&descending=true")
    header = browser.find_element(By.XPATH, "//th[a[text()='cFLOP']]")
    assert header.get_attribute("aria-sort") == "descending"
    shown = [
        int(r.get_attribute("data-submission")) for r in browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
    ]
    api = json.loads(
        browser.execute_script("return fetch('/v1/leaderboard?sort=cflop&descending=true').then(r => r.text())")
    )
    assert shown == [item["submission_id"] for item in api["items"]]
    csv_text = browser.execute_script(
        "return fetch(document.querySelector(\"a[href^='/leaderboard.csv']\").href).then(r => r.text())"
    )
    assert csv_text.splitlines()[0].startswith("rank,submission_id,learner") and len(csv_text.splitlines()) == 1 + len(
        ids
    )
    browser.find_element(By.XPATH, "//th[a[text()='Profile score']]/a").click()  # best profile score first
    WebDriverWait(browser, 30).until(lambda d: "sort=profile" in d.current_url)
    assert browser.find_element(By.ID, "profile-header").get_attribute("aria-sort") == "descending"
    shown = [
        int(r.get_attribute("data-submission")) for r in browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
    ]
    api = json.loads(browser.execute_script("return fetch('/v1/leaderboard?sort=profile').then(r => r.text())"))
    assert shown == [item["submission_id"] for item in api["items"]]
    scores = [item["profile_score"] for item in api["items"]]
    assert None not in scores and scores == sorted(scores, reverse=True)
    errors, foreign = _problems(browser, server)
    assert errors == [] and foreign == []


def test_a_submission_page_has_its_tasks_plots_and_regret(browser, server, runs):
    url, _, ids = runs
    _open(browser, server + "/", charts=1)
    browser.find_element(By.CSS_SELECTOR, f"tr[data-submission='{ids[1]}'] td a").click()
    WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-drawn]")) >= 2)
    assert browser.current_url == f"{server}/submissions/{ids[1]}"
    with sessions_on(url)() as session:
        summary = load_summary(session, submission_id=ids[1])
    rows = browser.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")
    assert len(rows) == len(summary.tasks) == 5
    bars = browser.execute_script("return document.getElementById('tasks').data[0].y")
    assert bars == pytest.approx([t.error for t in summary.tasks])
    regret = browser.execute_script("return document.getElementById('regret').data[0].y")
    with sessions_on(url)() as session:
        indep = load_summary(session, submission_id=ids[0])
    assert regret[-1] == pytest.approx(sum(a.error - b.error for a, b in zip(summary.tasks, indep.tasks)))
    assert browser.find_element(By.ID, "headline-e").text == f"{summary.mean_error:.4f}"
    cpu = "unknown" if summary.cpu_seconds is None else cpu_seconds_text(summary.cpu_seconds)
    assert browser.find_element(By.ID, "cpu-seconds").text == cpu  # never 0 for not measured
    assert "floor" in browser.find_element(By.ID, "cflop").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tasks tbody .badge-floor")) == summary.floored_tasks == 1
    browser.save_screenshot(str(SCREENSHOTS / "submission.png"))
    browser.find_element(By.LINK_TEXT, "Probes").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Probes of submission #{ids[1]}"
    errors, foreign = _problems(browser, server)
    assert errors == [] and foreign == []


def test_compare_and_keyboard_navigation(browser, server, runs):
    _, _, ids = runs
    _open(browser, f"{server}/compare?ids={ids[0]},{ids[1]}", charts=1)
    traces = browser.execute_script("return document.getElementById('compare').data.length")
    assert traces == 2 and len(browser.find_elements(By.CSS_SELECTOR, "#compare tbody tr")) == 5
    delta = browser.find_element(By.ID, "delta-e").text  # the paired interval of ΔE and its verdict
    assert "95 %" in delta and ("beyond noise" in delta or "within noise" in delta)
    with sessions_on(runs[0])() as session:
        a, b = (load_summary(session, submission_id=i) for i in ids)
    assert float(delta.split()[0]) == pytest.approx(a.mean_error - b.mean_error, abs=1e-4)
    assert float(browser.find_element(By.ID, "delta-cflop").text) == pytest.approx(a.cflop - b.cflop, rel=1e-3)
    assert browser.find_element(By.ID, "differing-tasks").text  # the tasks beyond noise, or "none"
    per_task = [r.find_elements(By.TAG_NAME, "td") for r in browser.find_elements(By.CSS_SELECTOR, "#compare tbody tr")]
    paired = [cells for cells in per_task if cells[-2].text != "–"]  # the headline tasks both committed
    assert paired and all(cells[-1].text in ("yes", "no") and "[" in cells[-2].text for cells in paired)
    flops = {t.order: t.flops for t in a.tasks}, {t.order: t.flops for t in b.tasks}
    for cells in paired:  # per task Δ FLOPs, counted
        order = int(cells[0].text)
        assert float(cells[-3].text) == pytest.approx(flops[0][order] - flops[1][order], rel=1e-3)
    _open(browser, server + "/")
    browser.find_element(By.TAG_NAME, "body").send_keys("\t")  # the first Tab reaches "Skip to content"
    assert browser.switch_to.active_element.text == "Skip to content"
    _open(browser, f"{server}/submissions/999999")
    assert "No run with id 999999" in browser.find_element(By.TAG_NAME, "main").text
    errors, foreign = _problems(browser, server)
    assert [e for e in errors if "999999" not in e] == [] and foreign == []  # the 404 itself is logged


def test_the_profiles_page_is_one_click_from_the_leaderboard(browser, server, runs):
    _, _, ids = runs
    _open(browser, server + "/")
    browser.find_element(By.ID, "profiles-link").click()
    WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-drawn]")) >= 1)
    rows = browser.find_elements(By.CSS_SELECTOR, "#profiles tbody tr")
    assert sorted(int(r.get_attribute("data-submission")) for r in rows) == sorted(ids)
    names = browser.execute_script("return document.getElementById('profile-error').data.map(t => t.name)")
    assert len(names) == len(ids) and all(name.startswith("#") for name in names)
    scores = [float(r.find_elements(By.TAG_NAME, "td")[1].text) for r in rows]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    errors, foreign = _problems(browser, server)
    assert errors == [] and foreign == []


def _version(session, submission_id: int) -> str:
    from services.store.db.models import Submission

    return session.get(Submission, submission_id).stream_version.version
