"""The leaderboard's read model on both databases: ranks, sorting, filters, pagination in SQL,
and the Pareto front, checked against values computed here from the same rows; beside cFLOP,
the harness-measured CPU time and the floor mark, as rows, run summaries and ``nevis results``
show them."""

from __future__ import annotations

from collections import defaultdict

import pytest
from sqlalchemy import select

from services.core.metrics import pareto_front, regret_curve
from services.store.db import make_engine, session_factory, sessions_on, transaction
from services.store.db.models import StreamTask, TaskResult
from services.store.runs.board_front import front_points, stream_versions
from services.store.runs.leaderboard import leaderboard
from tests.support.synthetic_results import seed_results


@pytest.fixture
def seeded(database_url):
    sessions = sessions_on(database_url)
    with transaction(sessions) as session:
        stream = seed_results(session, submissions=12, tasks=10, seed=3)
    with sessions() as session:
        rows = session.execute(
            select(TaskResult.submission_id, TaskResult.error, TaskResult.flops, StreamTask.phase).join(
                StreamTask, StreamTask.id == TaskResult.stream_task_id
            )
        ).all()
    expected = defaultdict(lambda: {"errors": [], "flops": 0.0})
    for sid, error, flops, phase in rows:
        expected[sid]["flops"] += flops
        if phase == "meta_test":
            expected[sid]["errors"].append(error)
    return sessions, stream, {sid: (sum(v["errors"]) / len(v["errors"]), v["flops"]) for sid, v in expected.items()}


def test_rows_carry_e_and_cflop_of_their_committed_tasks_ranked_by_e(seeded):
    sessions, stream, expected = seeded
    with sessions() as session:
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
    assert page.total == 12 and len(page.rows) == 12
    for row in page.rows:
        e, flops = expected[row.submission_id]
        assert row.mean_error == pytest.approx(e) and row.cflop == pytest.approx(flops)
        assert (row.tasks_done, row.headline_tasks, row.headline_done) == (10, 2, 2)
    assert [r.rank for r in page.rows] == list(range(1, 13))
    assert [r.mean_error for r in page.rows] == sorted(e for e, _ in expected.values())
    assert {r.baseline for r in page.rows} == {True, False}  # built-in entry points are baselines


def test_pages_sorts_and_filters_happen_in_sql(seeded):
    sessions, stream, expected = seeded
    with sessions() as session:
        first = leaderboard(session, stream=stream.stream, version=stream.version, limit=5)
        second = leaderboard(session, stream=stream.stream, version=stream.version, limit=5, offset=5)
        costly = leaderboard(
            session, stream=stream.stream, version=stream.version, sort="cflop", descending=True, limit=3
        )
        family = leaderboard(session, stream=stream.stream, version=stream.version, learner_prefix="ft_prev")
        no_baselines = leaderboard(session, stream=stream.stream, version=stream.version, baselines=False)
        assert stream_versions(session) == [(stream.stream, stream.version)]
    assert [r.rank for r in first.rows + second.rows] == list(range(1, 11)) and first.total == 12
    assert (
        [r.cflop for r in costly.rows]
        == pytest.approx(  # the database adds in its own order
            sorted((f for _, f in expected.values()), reverse=True)[:3], rel=1e-12
        )
    )
    assert family.total == 4 and {r.learner.split("-")[0] for r in family.rows} == {"ft_prev"}
    assert [r.rank for r in family.rows] == [1, 2, 3, 4]  # ranked within the filter
    assert no_baselines.total == 4 and not any(r.baseline for r in no_baselines.rows)


def test_the_front_is_the_pareto_front_of_every_finished_submission(seeded):
    sessions, stream, expected = seeded
    with sessions() as session:
        points = front_points(session, stream=stream.stream, version=stream.version)
    assert {p.submission_id for p in points} == set(expected)
    ids = sorted(expected)
    flags = dict(zip(ids, pareto_front([(expected[i][1], expected[i][0]) for i in ids]), strict=True))
    assert {p.submission_id: p.on_front for p in points} == flags and any(flags.values())
    for p in points:  # nobody dominates a front point
        if p.on_front:
            assert not any(
                q.cflop <= p.cflop
                and q.mean_error <= p.mean_error
                and (q.cflop < p.cflop or q.mean_error < p.mean_error)
                for q in points
            )


def test_pareto_and_regret_follow_metrics_md():
    assert pareto_front([(1, 0.5), (1, 0.6), (2, 0.5), (3, 0.1)]) == [True, False, False, True]
    assert regret_curve([0.5, 0.4, None, 0.1], [0.4, 0.5, 0.3, 0.1]) == pytest.approx([0.1, 0.0, None, None])


def test_the_spread_of_a_learners_seeds_is_shown_beside_its_e(seeded):
    sessions, stream, expected = seeded
    with sessions() as session:
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
    by_learner = defaultdict(list)
    for row in page.rows:
        by_learner[row.learner].append(expected[row.submission_id][0])
    import statistics

    for row in page.rows:
        values = by_learner[row.learner]
        assert row.runs_of_learner == len(values) == 4
        assert row.learner_e_std == pytest.approx(statistics.stdev(values))


def test_private_submissions_are_read_by_their_owner_and_admins_only(seeded):
    """A private row is left out before ranking for everyone but its owner and admins; a
    stream version with only private submissions is not listed for them either."""
    from services.core.errors import UnknownNameError
    from services.store.db.models import Submission
    from services.store.db.models_coordinator import ScheduledSubmission, User
    from services.store.runs.visibility import ADMIN, ANONYMOUS, Viewer, check_readable, effective_viewer

    sessions, stream, expected = seeded
    ids = sorted(expected)
    with transaction(sessions) as session:
        people = {name: User(name=name, role="submitter") for name in ("alice", "bob", "carol")}
        session.add_all(people.values())
        session.flush()
        session.add_all(
            [
                ScheduledSubmission(submission_id=ids[0], user_id=people["alice"].id),
                ScheduledSubmission(submission_id=ids[1], user_id=people["bob"].id),
                ScheduledSubmission(submission_id=ids[2], user_id=people["carol"].id),
            ]
        )
        for submission_id in ids[:2]:
            session.get(Submission, submission_id).visibility = "private"
        hidden = seed_results(session, submissions=1, tasks=3, stream="hidden", version="v1")
        session.get(Submission, hidden.submission_ids[0]).visibility = "private"
        viewers = {
            "anonymous": ANONYMOUS,
            "admin": ADMIN,
            **{name: Viewer(user_id=user.id) for name, user in people.items()},
        }
    with sessions() as session:
        boards = {
            who: leaderboard(session, stream=stream.stream, version=stream.version, limit=100, viewer=v)
            for who, v in viewers.items()
        }
        fronts = {
            who: {
                p.submission_id for p in front_points(session, stream=stream.stream, version=stream.version, viewer=v)
            }
            for who, v in viewers.items()
        }
        versions = {who: set(stream_versions(session, v)) for who, v in viewers.items()}
        effective = {who: effective_viewer(session, v) for who, v in viewers.items()}
        with pytest.raises(UnknownNameError) as private:
            check_readable(session, viewers["bob"], [ids[5], ids[0]])
        with pytest.raises(UnknownNameError) as missing:
            check_readable(session, viewers["bob"], [10**9])
        check_readable(session, viewers["alice"], [ids[0], ids[5]])  # hers and a public one
    shown = {who: {r.submission_id for r in board.rows} for who, board in boards.items()}
    public = set(ids[2:])
    assert shown == {
        "anonymous": public,
        "carol": public,
        "alice": public | {ids[0]},
        "bob": public | {ids[1]},
        "admin": set(ids),
    }
    assert fronts == shown  # every seeded submission is finished
    assert boards["anonymous"].total == 10 and [r.rank for r in boards["anonymous"].rows] == list(range(1, 11))
    assert {r.submission_id: r.visibility for r in boards["alice"].rows if r.visibility != "public"} == {
        ids[0]: "private"
    }
    assert versions["anonymous"] == versions["alice"] == {(stream.stream, stream.version)}
    assert versions["admin"] == {(stream.stream, stream.version), ("hidden", "v1")}
    # Readers who may see no private row are the anonymous reader (they share its answers).
    assert effective == {
        "anonymous": ANONYMOUS,
        "carol": ANONYMOUS,
        "admin": ADMIN,
        "alice": viewers["alice"],
        "bob": viewers["bob"],
    }
    assert str(private.value).replace(str(ids[0]), "N") == str(missing.value).replace(str(10**9), "N")


def test_rows_and_summaries_carry_harness_measured_cpu_and_the_floor(seeded, measured_run, database_url):
    """CPU seconds are summed over committed tasks in the page's one aggregate (NULL, not 0, when
    none was measured) and a row is marked when any committed task was charged the floor."""
    from sqlalchemy import event

    from services.store.runs.summary import load_summary

    sessions, stream, _ = seeded
    with transaction(sessions) as session:
        floored = measured_run(
            session,
            stream=stream.stream,
            version=stream.version,
            learner="floored",
            cpu={1: (2.5, False), 9: (12.0, True)},
            error=0.01,
        )
        honest = measured_run(
            session,
            stream=stream.stream,
            version=stream.version,
            learner="honest",
            cpu={order: (1.0, False) for order in range(1, 11)},
            error=0.02,
        )
    engine = make_engine(database_url)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with session_factory(engine)() as session:
        page = leaderboard(session, stream=stream.stream, version=stream.version, limit=100)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2  # the page with its total, the seeds' spread
    assert not any("task_results" in s for s in selects)  # the summary rows, no scan of results
    rows = {r.submission_id: r for r in page.rows}
    assert (rows[floored].cpu_seconds, rows[floored].flops_floored) == (pytest.approx(14.5), True)
    assert (rows[honest].cpu_seconds, rows[honest].flops_floored) == (pytest.approx(10.0), False)
    assert all(
        r.cpu_seconds is None and r.flops_floored is False
        for r in page.rows
        if r.submission_id not in (floored, honest)
    )
    assert rows[floored].to_dict()["cpu_seconds"] == pytest.approx(14.5)
    with sessions() as session:
        summary = load_summary(session, submission_id=floored)
        unmeasured = load_summary(session, submission_id=stream.submission_ids[0])
    assert (summary.cpu_seconds, summary.floored_tasks, summary.flops_floored) == (pytest.approx(14.5), 1, True)
    assert summary.flops_sources == ("floor", "measured")
    by_order = {t.order: t for t in summary.tasks}
    assert (by_order[9].cpu_seconds, by_order[9].flops_floored, by_order[9].flops) == (12.0, True, 90_000_000)
    assert (by_order[2].cpu_seconds, by_order[2].flops_floored) == (None, False)  # not measured: unknown
    assert summary.to_dict()["flops_floored"] is True and summary.to_dict()["floored_tasks"] == 1
    assert (unmeasured.cpu_seconds, unmeasured.floored_tasks, unmeasured.flops_floored) == (None, 0, False)


def test_nevis_results_prints_cpu_seconds_beside_cflop_and_explains_a_floor(
    seeded, measured_run, database_url, settings_env, monkeypatch
):
    import json

    from typer.testing import CliRunner

    from services.cli.main import app
    from services.core.config import get_settings

    sessions, stream, _ = seeded
    with transaction(sessions) as session:
        floored = measured_run(
            session, stream=stream.stream, version=stream.version, cpu={1: (2.5, False), 9: (12.0, True)}
        )
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    cli = CliRunner()
    shown = cli.invoke(app, ["results", str(floored)])
    assert shown.exit_code == 0, shown.output
    assert "CPU s = 14.5 (harness-measured)" in shown.output
    assert (
        "floor: 1 task(s) charged a FLOP floor: some trial's FLOP count was below what its measured CPU" in shown.output
    )
    assert "9.000e+07 floor" in shown.output and "unknown" in shown.output  # task 9, and the unmeasured tasks
    assert "7.50e+06" in shown.output  # task 9's implied FLOP per CPU-second: 9e7 / 12
    doc = json.loads(cli.invoke(app, ["results", str(floored), "--json"]).output)
    assert (doc["cpu_seconds"], doc["floored_tasks"], doc["flops_floored"]) == (14.5, 1, True)
    assert [(t["cpu_seconds"], t["flops_floored"]) for t in doc["tasks"]][7:] == [
        (None, False),
        (12.0, True),
        (None, False),
    ]
    unmeasured = cli.invoke(app, ["results", str(stream.submission_ids[0])]).output
    assert "CPU s = unknown (not measured)" in unmeasured and "floor:" not in unmeasured


def test_the_rank_and_metric_sorts_follow_each_metrics_spec(seeded, monkeypatch):
    from dataclasses import replace

    from services.core import metric_specs

    sessions, stream, expected = seeded
    specs = dict(metric_specs.HEADLINE_METRICS)
    with sessions() as session:
        ranked = [r.submission_id for r in leaderboard(session, stream=stream.stream, version=stream.version).rows]
        cheap = [
            r.submission_id
            for r in leaderboard(session, stream=stream.stream, version=stream.version, sort="cflop").rows
        ]
        monkeypatch.setattr(
            metric_specs,
            "HEADLINE_METRICS",
            {
                **specs,
                "E": replace(specs["E"], higher_is_better=True),
                "cFLOP": replace(specs["cFLOP"], higher_is_better=True),
            },
        )
        flipped = leaderboard(session, stream=stream.stream, version=stream.version)
        costly = [
            r.submission_id
            for r in leaderboard(session, stream=stream.stream, version=stream.version, sort="cflop").rows
        ]
    assert ranked == sorted(expected, key=lambda i: expected[i][0])  # lowest E first
    assert [r.submission_id for r in flipped.rows] == ranked[::-1] and flipped.rows[0].rank == 1
    assert costly == cheap[::-1]
