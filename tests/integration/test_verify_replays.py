"""Verified rows (issue 50) on a real mini run, real PostgreSQL and a real local Ray: ``nevis
verify`` replays a finished public run with new seeds; the run is marked ``verified`` when
every replay's E falls inside its interval on this benchmark, ``not_reproduced`` when the
learner's predictions became ``os.urandom`` draws. One finished run serves both cases (the
second request judges only its own replays); the original's numbers never change, and the
replays are no leaderboard rows of their own."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from services.cli.main import app
from services.cli.verify_cmd import mark_line, stored_mark_line, verify_locally
from services.core.budget import RunBudget
from services.store.db.models import Submission, TaskResult
from services.store.db.models_verify import SubmissionReplay, SubmissionVerdict
from services.store.runs.summary import load_summary
from services.store.runs.verdicts import marks_of
from services.store.runs.verification import NotVerifiableError, check_verifiable
from workers.trainer.run_plan import RunRequest

pytestmark = [
    pytest.mark.usefixtures("ray_local"),
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]


def one_meta_test_task(tiny_stream):
    """The tiny stream cut to one meta-test task (a run is one task: seconds)."""
    doc = json.loads(tiny_stream.read_text())
    doc["tasks"] = [{**doc["tasks"][1], "order": 1, "year": 2021}]  # shapes:hue: six colours
    doc["version"] = "verify-1"
    path = tiny_stream.parent / "verify.json"
    path.write_text(json.dumps(doc))
    return str(path)


def numbers(runner, submission_id):
    """What the original's row shows: E, cFLOP and its results."""
    with runner.sessions() as session:
        summary = load_summary(session, submission_id=submission_id)
        results = session.scalars(select(TaskResult).where(TaskResult.submission_id == submission_id)).all()
        return summary.mean_error, summary.cflop, [(r.id, r.error, r.flops) for r in results]


def test_verify_marks_a_reproducible_run_verified_and_a_random_one_not_reproduced(runner, tiny_stream, learner_dir):
    from nevis_verify_learners import RANDOM_FLAG

    budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,))
    stream = one_meta_test_task(tiny_stream)
    original = runner.start(RunRequest(stream=stream, learner="nevis_verify_learners:settled", budget=budget))
    before = numbers(runner, original)
    assert before[0] is not None and before[0] < 0.6  # the learner learns something: chance is 5/6

    found = verify_locally(runner, original, seeds=2, requested_by="test")
    assert found.verdict == "verified", found.to_dict()
    low, high, level = found.interval
    assert level == 0.95 and low <= before[0] <= high
    assert [r["status"] for r in found.replays] == ["succeeded", "succeeded"]
    assert all(r["inside"] and r["error"] == pytest.approx(before[0]) for r in found.replays)
    first = [r["id"] for r in found.replays]
    assert "verified" in mark_line(found)

    (learner_dir / RANDOM_FLAG).write_text("predictions from os.urandom from now on")
    try:
        found = verify_locally(runner, original, seeds=2, requested_by="test")
    finally:
        (learner_dir / RANDOM_FLAG).unlink()
    assert found.verdict == "not_reproduced", found.to_dict()
    latest = [r for r in found.replays if r["request"] == 2]
    assert len(latest) == 2 and all(r["error"] > high and r["inside"] is False for r in latest)
    assert "outside" in found.note and "not reproduced" in mark_line(found)

    assert numbers(runner, original) == before  # replays never change the original's numbers
    assert stored_mark_line(original).startswith("verification: [red]not reproduced")  # what `nevis results` prints
    assert stored_mark_line(first[0]).startswith(f"replay of run {original}")
    shown = CliRunner().invoke(app, ["verify", str(original), "--show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["verdict"] == "not_reproduced"
    refused = CliRunner().invoke(app, ["verify", str(first[0]), "--seeds", "1"])
    assert isinstance(refused.exception, NotVerifiableError) and "is a replay of run" in str(refused.exception)
    with runner.sessions() as session:
        replays = session.scalars(select(SubmissionReplay).order_by(SubmissionReplay.replay_id)).all()
        assert [r.original_id for r in replays] == [original] * 4
        assert [r.replay_id for r in replays[:2]] == first
        original_row = session.get(Submission, original)
        seeds = [original_row.budget["seed"], *(r.seed for r in replays)]
        assert len(set(seeds)) == 5  # each replay a new seed
        for replay in replays:
            row = session.get(Submission, replay.replay_id)
            assert row.learner_id == original_row.learner_id and row.budget["seed"] == replay.seed
            assert (row.stream_version_id, row.phase, row.image_size, row.ruleset) == (
                original_row.stream_version_id,
                original_row.phase,
                original_row.image_size,
                original_row.ruleset,
            )
        assert session.get(SubmissionVerdict, original).request == 2
        assert marks_of(session, [original, first[0]])[original].mark == "not_reproduced"
        assert first[0] not in marks_of(session, [original, first[0]])
        with pytest.raises(NotVerifiableError, match="is a replay of run"):
            check_verifiable(session, submission_id=first[0])
