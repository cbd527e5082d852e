"""Performance profiles read from stored task results (services/store/runs/profiles.py) and
served by GET /v1/leaderboard/profiles, checked against a loop-by-loop computation here from
the same rows, on both databases; and the leaderboard's profile-score column and sort."""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from services.core.profiles import ERROR_FLOOR, TARGET_TOLERANCE, TAU_MAX
from services.dashboard.server import create_server_app
from services.store.db.models import Learner, StreamTask, Submission, TaskResult


def _score(ratios: list[float]) -> float:
    """Normalised area under the step curve: each task within tau_max adds (tau_max - r)."""
    return sum(TAU_MAX - max(r, 1.0) for r in ratios if r <= TAU_MAX) / ((TAU_MAX - 1.0) * len(ratios))


def _expected(sessions) -> tuple[dict[int, float], dict[int, float]]:
    with sessions() as session:
        rows = session.execute(
            select(TaskResult.submission_id, StreamTask.order, TaskResult.error, TaskResult.flops, Learner.entrypoint)
            .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
            .join(Submission, Submission.id == TaskResult.submission_id)
            .join(Learner, Learner.id == Submission.learner_id)
            .where(StreamTask.phase == "meta_test")
        ).all()
    error, flops, indep = defaultdict(dict), defaultdict(dict), defaultdict(list)
    for sid, order, e, f, entrypoint in rows:
        error[sid][order], flops[sid][order] = e, f
        if entrypoint == "indep":
            indep[order].append(e)
    tasks = sorted({order for _, order, *_ in rows})
    best = {t: min(error[s][t] for s in error) for t in tasks}
    by_error = {s: _score([(error[s][t] + ERROR_FLOOR) / (best[t] + ERROR_FLOOR) for t in tasks]) for s in error}
    reference = {t: statistics.median(indep[t]) + TARGET_TOLERANCE for t in tasks}  # Indep's median + tolerance
    reached = {t: [flops[s][t] for s in error if error[s][t] <= reference[t]] for t in tasks}
    by_cflop = {
        s: _score([flops[s][t] / min(reached[t]) if error[s][t] <= reference[t] else float("inf") for t in tasks])
        for s in error
    }
    return by_error, by_cflop


def test_profiles_match_a_direct_computation_and_the_api_serves_them(seed_board):
    settings, sessions, stream = seed_board(submissions=12, tasks=15, seed=5)
    by_error, by_cflop = _expected(sessions)
    with TestClient(create_server_app(settings)) as client:
        body = client.get("/v1/leaderboard/profiles").json()
        missing = client.get("/v1/leaderboard/profiles", params={"stream": "nothing-here"}).json()
        bad = client.get("/v1/leaderboard/profiles", params={"phase": "meta_train"})
    profiles = body["profiles"]
    assert (body["stream"], body["version"]) == (stream.stream, stream.version)
    assert profiles["tasks"] == 3 and profiles["reference"] == "indep" and profiles["reference_runs"] == 4
    assert profiles["taus"][0] == 1.0 and profiles["taus"][-1] == TAU_MAX
    rows = profiles["rows"]
    assert {r["submission_id"] for r in rows} == set(stream.submission_ids)
    for row in rows:
        assert row["error_score"] == pytest.approx(by_error[row["submission_id"]])
        assert row["cflop_score"] == pytest.approx(by_cflop[row["submission_id"]])
        assert len(row["error_curve"]) == len(profiles["taus"]) and row["error_curve"][-1] <= 1.0
    assert [r["error_score"] for r in rows] == sorted((r["error_score"] for r in rows), reverse=True)
    assert max(by_error.values()) > min(by_error.values())  # the check could fail
    assert missing["profiles"] is None or missing["profiles"]["rows"] == []
    assert bad.status_code == 422


def test_the_profiles_page_lists_every_score_and_draws_both_profiles(seed_board):
    settings, _, stream = seed_board(submissions=6, tasks=10, seed=2)
    with TestClient(create_server_app(settings)) as client:
        board = client.get("/").text
        page = client.get("/profiles")
        api = client.get("/v1/leaderboard/profiles").json()["profiles"]
        sorted_by_paper = client.get("/", params={"sort": "cflop_paper"})
    assert 'id="profiles-link"' in board and page.status_code == 200
    html = page.text
    assert 'id="profile-error"' in html and 'id="profile-cflop"' in html
    for row in api["rows"]:
        assert f'data-submission="{row["submission_id"]}"' in html
        assert f"{row['error_score']:.3f}" in html
    assert 'id="target-name"' in html and "median error + 0.01" in html  # the target says what it is
    floors = html.split('id="profile-floors"', 1)[1]  # the error profile at 3 floors, every submission
    assert floors.count("<tr data-submission=") == len(api["rows"]) and "Score at 0.001 (used)" in floors
    assert sorted_by_paper.status_code == 200  # the page's cFLOP (paper) header sorts


def test_the_leaderboard_carries_and_sorts_by_the_profile_scores(seed_board):
    settings, sessions, stream = seed_board(submissions=9, tasks=10, seed=7)
    by_error, by_cflop = _expected(sessions)
    with TestClient(create_server_app(settings)) as client:
        board = client.get("/v1/leaderboard", params={"sort": "profile", "limit": 4}).json()
        rest = client.get("/v1/leaderboard", params={"sort": "profile", "limit": 50, "offset": 4}).json()
        worst = client.get("/v1/leaderboard", params={"sort": "profile", "descending": "true"}).json()
        page = client.get("/", params={"sort": "profile"}).text
        csv_text = client.get("/leaderboard.csv", params={"sort": "profile"}).text
    items = board["items"] + rest["items"]
    assert board["total"] == len(items) == len(stream.submission_ids)
    for item in items:
        assert item["profile_score"] == pytest.approx(by_error[item["submission_id"]])
        assert item["cflop_profile_score"] == pytest.approx(by_cflop[item["submission_id"]])
    scores = [i["profile_score"] for i in items]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]  # best first, and they differ
    assert [i["profile_score"] for i in worst["items"]] == sorted(scores)
    assert 'aria-sort="descending"' in page.split('id="profile-header"', 1)[1].split(">", 1)[0]
    shown = [int(part.split('"', 1)[0]) for part in page.split('<tr data-submission="')[1:]]
    assert shown == [i["submission_id"] for i in items]
    assert f"{items[0]['profile_score']:.3f}" in page and 'id="board-legend"' in page
    assert "profile_score" in csv_text.splitlines()[0] and "code_public" in csv_text.splitlines()[0]


def test_kept_scores_follow_a_changed_result(seed_board):
    """The scores are kept per submission (``submission_profiles``) as results commit: a result
    that changes (and with it the submission's kept E, as a commit rewrites it) is seen at the
    next read."""
    from services.store.db import transaction
    from services.store.db.models_scores import SubmissionProfile
    from services.store.runs.profiles import profile_scores
    from services.store.runs.scores import rescore

    _, sessions, stream = seed_board(submissions=6, tasks=10, seed=3)
    with sessions() as session:
        before = profile_scores(session, stream=stream.stream, version=stream.version)
        kept = {r.submission_id: (r.error_score, r.cflop_score) for r in session.scalars(select(SubmissionProfile))}
        assert before == kept and len(kept) == 6  # read from the kept rows
    worst = min(before, key=lambda sid: before[sid][0])
    with transaction(sessions) as session:
        for result in session.scalars(
            select(TaskResult)
            .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
            .where(TaskResult.submission_id == worst, StreamTask.phase == "meta_test")
        ):
            result.error = 0.0  # now the best on every task
        rescore(session, submission_ids=[worst])
    with sessions() as session:
        after = profile_scores(session, stream=stream.stream, version=stream.version)
    assert after[worst][0] == pytest.approx(_expected(sessions)[0][worst]) == pytest.approx(1.0)
    assert after[worst][0] > before[worst][0]


def test_pt_rows_are_marked_where_the_board_stands_beside_paper_figures(seed_board):
    """A PT baseline's starting network is not the paper's (a 224 px torchvision ResNet-34): its
    rows carry a badge saying so, and the legend explains it (issue 47, item 7)."""
    from services.store.db import transaction

    settings, sessions, _ = seed_board(submissions=6, tasks=10, seed=2)
    with transaction(sessions) as session:
        learner = session.scalar(select(Learner).where(Learner.entrypoint == "ft_prev"))
        learner.name = learner.entrypoint = "pt"  # as a local `nevis run --learner pt` stores it
        runs = session.scalar(select(func.count()).select_from(Submission).where(Submission.learner_id == learner.id))
    with TestClient(create_server_app(settings)) as client:
        page = client.get("/").text
    rows = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    assert runs >= 1 and rows.count('class="badge badge-closed badge-pt"') == runs
    assert "not the paper&#39;s 64 px ImageNet network" in rows or "not the paper's 64 px ImageNet network" in rows
    assert "PT: 224 px torchvision" in page.split('id="board-legend"', 1)[1]
