"""The transfer baselines end to end on a real local Ray: earlier predictors and a pretrained
checkpoint reach sandboxed learners by reference, through harness code.

Runs on both dialects (the ``database_url`` fixture): FT-d's choice on the second task ranks
the first task's predictor (the fresh network is scored apart, never chosen); PT+FT's ranking
also holds the pretrained checkpoint made by ``nevis pretrain``'s function (an ordinary
meta-train run, whose id and cFLOP the checkpoint records), stored once under its digest; that
self-pretrained checkpoint runs under ``pt_ft_self``, is taken by ``pt_self`` and is refused by the paper's ``pt``; BHPO runs
with its preferred search unless the run names one.

The runs train the ``_small`` learners (the small CNN, fast on CPUs); the built-in names are
the paper's ResNet-34 baselines (tests/unit/learners/test_registry.py), which train here only
in the failure case below, and not even one step.
"""

from __future__ import annotations

import hashlib
import pickle

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.budget import RunBudget
from services.store.db.models import Submission
from services.store.runs import records
from services.store.runs.leaderboard import leaderboard
from services.store.runs.summary import load_summary
from workers.learners.provenance import SELF, read_provenance
from workers.learners.selection import PRETRAINED
from workers.stream.manifest_files import load_stream
from workers.trainer.pretrain import pretrain
from workers.trainer.run_plan import RunRequest
from workers.trainer.stream_runner import StreamRunner

# What is tested here is learner-side (the sandbox, the harness, FLOPs), not the database
# dialect: SQLite only (the runner's PostgreSQL path is covered by test_run_stream).
pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

BUDGET = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,))


def final_state(runner: StreamRunner, run_id: int) -> dict:
    with runner.sessions() as session:
        key = records.last_state_key(session, submission_id=run_id)
    return pickle.loads(runner.store.get_bytes(key))


def test_ft_d_ranks_each_earlier_predictor_and_records_the_fresh_network(runner, tiny_stream):
    run_id = runner.start(RunRequest(stream=str(tiny_stream), learner="ft_d_small", budget=BUDGET))
    state = final_state(runner, run_id)
    assert 1 not in state  # nothing to choose from on the first task
    assert set(state[2]["knn_error"]) == {1} and state[2]["chosen"] == 1
    assert set(state[3]["knn_error"]) == {1, 2} and state[3]["chosen"] in {1, 2}
    assert all(isinstance(state[t]["fresh_would_win"], bool) and state[t]["fresh_error"] >= 0 for t in (2, 3))


def test_self_pretraining_runs_as_pt_self_and_pt_ft_self_and_pt_refuses_it(runner, tiny_stream, tmp_path):
    manifest = load_stream(str(tiny_stream))
    made = pretrain(runner, stream=str(tiny_stream), steps=2, learner="ft_prev_small")
    assert made.tasks == len(manifest.meta_train) and made.flops > 0
    assert runner.plan(made.submission_id).phase == "meta_train"  # a recorded run; meta-test unread
    record = read_provenance(made.checkpoint)
    assert record is not None and record.origin == SELF
    assert (record.submission_id, record.cflop) == (made.submission_id, made.flops)  # shown beside PT's own
    checkpoint = tmp_path / "pre.bin"
    checkpoint.write_bytes(made.checkpoint)
    run_id = runner.start(
        RunRequest(stream=str(tiny_stream), learner="pt_ft_self_small", budget=BUDGET, pretrained=str(checkpoint))
    )
    state = final_state(runner, run_id)
    assert set(state[1]["knn_error"]) == {PRETRAINED}
    assert set(state[3]["knn_error"]) == {PRETRAINED, 1, 2}
    with runner.sessions() as session:
        key = session.get(Submission, run_id).pretrained_key
    assert key == f"pretrained/{hashlib.sha256(made.checkpoint).hexdigest()}.bin"
    assert runner.store.get_bytes(key) == made.checkpoint
    # `pt_self` takes the same checkpoint (its first task loads it and trains from it).
    pt_self = runner.create(
        RunRequest(
            stream=str(tiny_stream),
            learner="pt_self_small",
            budget=RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,)),
            pretrained=str(checkpoint),
        )
    )
    assert runner.run_next_task(pt_self)
    with runner.sessions() as session:
        first = load_summary(session, submission_id=pt_self).tasks[0]
    assert first.status == "committed" and first.error is not None
    with runner.sessions() as session:
        summary = load_summary(session, submission_id=run_id)
        board = leaderboard(session, stream=manifest.name, version=manifest.version)
    assert (summary.status, summary.learner, len(summary.tasks)) == (
        "succeeded",
        "pt_ft_self_small",
        len(manifest.tasks),
    )
    # The pretraining run's cFLOP beside the PT run's own, not in it: the run summary (what
    # `nevis results` and the API show) and the leaderboard row.
    assert summary.cflop_pretraining == made.flops and summary.cflop == sum(t.flops for t in summary.tasks)
    assert {r.submission_id: r.cflop_pretraining for r in board.rows}[run_id] == made.flops
    shown = CliRunner().invoke(app, ["results", str(run_id)])
    assert f"cFLOP of pretraining = {made.flops:.4e}" in shown.output, shown.output
    # The paper's PT starts from outside data: a self-pretrained checkpoint is refused, naming the way out.
    with pytest.raises(Exception, match="declares no such provenance") as info:
        runner.start(RunRequest(stream=str(tiny_stream), learner="pt_small", budget=BUDGET, pretrained=str(checkpoint)))
    assert "pt_self" in str(info.value) and "nevis pretrain import" in str(info.value)
    # `pt_self` is the ResNet-34: this small-CNN checkpoint is refused, naming both networks.
    with pytest.raises(Exception, match=r"small_cnn \(width 32\) into a resnet34 \(width 64\)") as info:
        runner.start(RunRequest(stream=str(tiny_stream), learner="pt_self", budget=BUDGET, pretrained=str(checkpoint)))
    assert "pretrained checkpoint was made with another network" in str(info.value)


def test_pt_without_a_checkpoint_fails_with_the_reason(runner, tiny_stream):
    with pytest.raises(Exception, match="without a pretrained checkpoint"):
        runner.start(RunRequest(stream=str(tiny_stream), learner="pt_small", budget=BUDGET))


def test_a_missing_pretrained_file_is_refused_before_the_run_exists(runner, tiny_stream):
    with pytest.raises(Exception, match="neither a file nor a key"):
        runner.create(
            RunRequest(stream=str(tiny_stream), learner="pt_small", budget=BUDGET, pretrained="/no/such/checkpoint.bin")
        )


def test_bhpo_takes_its_preferred_search_unless_the_run_names_one(runner, tiny_stream):
    preferred = runner.create(RunRequest(stream=str(tiny_stream), learner="bhpo", budget=BUDGET))
    named = runner.create(
        RunRequest(stream=str(tiny_stream), learner="bhpo", budget=RunBudget(trials=1, steps=2, search="random"))
    )
    assert runner.plan(preferred).budget.search == "gp_ucb"
    assert runner.plan(named).budget.search == "random"
