"""GET /v1/compare with two runs or more a side (seeds, issue 47): ΔE over seeds and test
examples with its interval, the probability of improvement P(a < b), per-task flags that say
they cover seed variance and are controlled by Holm; and clear 422s for sides that cannot be
compared."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.predictions import TaskPredictions, encode
from services.core.seed_compare import seeds_delta

LEARNER = {"name": "nm-seeds", "entrypoint": "nevis_test_learners:nearest_mean"}


def _predictions(wrong: int, n: int = 40) -> tuple[bytes, TaskPredictions]:
    """A single-label task of ``n`` examples with its first ``wrong`` misclassified."""
    labels = np.arange(n) % 4
    predicted = labels.copy()
    predicted[:wrong] = (predicted[:wrong] + 1) % 4
    return encode(np.eye(4)[predicted], labels, "single"), TaskPredictions("single", predicted, labels)


def test_two_seeds_a_side_give_the_seeds_bootstrap_and_p_of_improvement(client, tokens, coord_settings, measured_run):
    from services.store.db import make_engine, session_factory, transaction
    from services.store.objects import open_store
    from services.store.runs.predictions import committed_attempts, predictions_key

    headers = tokens.auth("alice")
    learner = client.post("/v1/learners", json=LEARNER, headers=headers).json()["id"]
    body = {"learner_id": learner, "stream": "tiny3", "budget": {"trials": 1, "steps": 2}}
    wrongs = {}
    engine = make_engine(coord_settings.database_url)
    store = open_store(coord_settings.store_url)
    kept: dict[int, list[TaskPredictions]] = {}
    try:
        for pair in ((10, 12), (20, 23)):  # a's seeds, then b's: two at a time (alice's quota)
            ids = [client.post("/v1/submissions", json=body, headers=headers).json()["id"] for _ in pair]
            with transaction(session_factory(engine)) as session:
                for run, wrong in zip(ids, pair, strict=True):
                    measured_run(session, submission_id=run, cpu={}, error=wrong / 40)
                    wrongs[run] = wrong
            with session_factory(engine)() as session:
                for run in ids:
                    for order, attempt in sorted(committed_attempts(session, submission_id=run).items()):
                        blob, predictions = _predictions(wrongs[run])
                        store.put_bytes(predictions_key(run, order, attempt), blob)
                        if order == 3:  # tiny3's meta-test task
                            kept.setdefault(run, []).append(predictions)
    finally:
        engine.dispose()
    a, b = sorted(wrongs)[:2], sorted(wrongs)[2:]

    found = client.get("/v1/compare", params={"a": a, "b": b}, headers=headers)
    assert found.status_code == 200, found.text
    doc = found.json()
    expected = seeds_delta([kept[i] for i in a], [kept[i] for i in b])
    assert doc["runs_a"] == a and doc["runs_b"] == b and (doc["a"], doc["b"]) == (a[0], b[0])
    assert doc["delta_error"] == pytest.approx((10 + 12 - 20 - 23) / 80)
    interval = doc["delta_error_interval"]
    assert (interval["low"], interval["high"]) == pytest.approx((expected.interval.low, expected.interval.high))
    assert interval["high"] < 0 and "seeds" in interval["method"] and interval["generalisation"] is None
    poi = doc["probability_of_improvement"]
    assert poi["estimate"] == 1.0 and poi["unavailable"] is None  # every seed of a beats every seed of b
    assert doc["flags"]["correction"] == "Holm" and "seeds" in doc["flags"]["noise"] and doc["flags"]["family"] == 1
    task = doc["tasks"][0]
    assert (
        task["p_adjusted"] == pytest.approx(expected.tasks[0].p_adjusted)
        and task["differs"] == expected.tasks[0].differs
    )

    one = client.get("/v1/compare", params={"a": a[0], "b": b[0]}, headers=headers).json()
    assert one["probability_of_improvement"]["estimate"] is None
    assert "two runs or more" in one["probability_of_improvement"]["unavailable"]
    assert "seed variance not covered" in one["flags"]["noise"]
    assert one["delta_error_interval"]["generalisation"]["method"].startswith("generalisation to other tasks")

    mixed = client.get("/v1/compare", params={"a": a, "b": b[0]}, headers=headers)
    assert mixed.status_code == 422 and "two runs or more (seeds) on each side" in mixed.json()["detail"]
    twice = client.get("/v1/compare", params={"a": a, "b": [a[0], b[0]]}, headers=headers)
    assert twice.status_code == 422 and f"{a[0]} named twice" in twice.json()["detail"]
