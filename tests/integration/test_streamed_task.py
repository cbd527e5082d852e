"""A task too large to send whole reaches the sandboxed learner as a stream of shards (issue 21, item 4).

With ``NEVIS_STREAM_TRAIN_BYTES`` at 1 every task is "large": the harness loads no train split,
and the learner host asks harness code for each shard (``train_shard``), since it holds no
store credentials. The stream task is prepared in shards of 24 rows first, so it has several.
``stream_recorder`` keeps what its view offered; ``indep_small`` trains from the stream as it
would on ImageNet.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from services.core.budget import RunBudget
from services.store.db.models import Trial
from services.store.objects import open_store
from tests.integration.conftest import tiny_manifest
from tests.integration.test_adversaries import _final_state, _trials
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream
from workers.stream.task_data import load_task_index
from workers.trainer.run_plan import RunRequest

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

ROWS_PER_SHARD = 24


@pytest.fixture
def streamed(settings_env, database_url, monkeypatch, tmp_path):
    """A runner that streams every task, and a one-task stream prepared in small shards."""
    from services.core.config import get_settings
    from workers.trainer.stream_runner import StreamRunner

    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    monkeypatch.setenv("NEVIS_STREAM_TRAIN_BYTES", "1")
    get_settings.cache_clear()
    settings = get_settings()
    path = tiny_manifest(tmp_path / "one.json", tasks=1)
    manifest, store = load_stream(str(path)), open_store(settings.store_url)
    prepare_stream(
        manifest,
        store,
        image_size=16,
        offline_dir=settings.offline_data_dir,
        stored_scale=settings.stored_scale,
        max_examples_per_shard=ROWS_PER_SHARD,
    )
    index = load_task_index(store, manifest.tasks[0], image_size=16)
    return StreamRunner(settings), str(path), index


def test_a_streamed_task_reaches_the_learner_shard_by_shard(streamed):
    runner, stream, index = streamed
    shards = index.shards["train"]
    assert len(shards) >= 3, "the task must span several shards for this test to prove anything"
    budget = RunBudget(trials=1, steps=2, checkpoint_fractions=(1.0,))
    run = runner.start(RunRequest(stream=stream, learner="nevis_stream_learners:stream_recorder", budget=budget))
    seen = _final_state(runner, run)["seen"]
    rows = sum(s.num_examples for s in shards)
    assert seen["offered"] and seen["rows"] == rows == seen["whole_rows"] == index.counts["train"]
    assert seen["epoch_labels"] == seen["whole_labels"]  # one epoch of the stream is the split
    assert seen["batch_images"] == (4, 16, 16, 3) and seen["batch_originals"] is not None
    assert 1 <= seen["peak_shards"] <= 4  # buffer_shards + prefetch: a bounded share of the split


def test_indep_small_trains_a_streamed_task_in_its_host(streamed):
    runner, stream, _ = streamed
    budget = RunBudget(trials=1, steps=3, checkpoint_fractions=(1.0,))
    run = runner.start(RunRequest(stream=stream, learner="indep_small", budget=budget))
    (trial,) = _trials(runner, run)
    assert trial.status == "succeeded", trial.traceback
    assert trial.flops > 0 and trial.flops_source != "floor"
    with runner.sessions() as session:
        assert session.scalar(select(Trial.dev_error).where(Trial.id == trial.id)) is not None
