"""E's interval on GET /v1/submissions/{id} and the paired comparison of GET /v1/compare: null
with the reason before predictions are stored, the bootstrap's figures once they are, and a 422
for runs that cannot be paired."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.predictions import TaskPredictions, encode
from services.core.uncertainty import error_interval, paired_delta

LEARNER = {"name": "nm", "entrypoint": "nevis_test_learners:nearest_mean"}


def _predictions(wrong: int, n: int = 40) -> tuple[bytes, TaskPredictions]:
    """A single-label task of ``n`` examples with ``wrong`` of them misclassified."""
    labels = np.arange(n) % 4
    predicted = labels.copy()
    predicted[:wrong] = (predicted[:wrong] + 1) % 4
    scores = np.eye(4)[predicted]
    return encode(scores, labels, "single"), TaskPredictions("single", predicted, labels)


def test_interval_and_paired_comparison_over_the_api(client, tokens, coord_settings, measured_run):
    from services.store.db import make_engine, session_factory, transaction
    from services.store.objects import open_store
    from services.store.runs.predictions import committed_attempts, predictions_key

    headers = tokens.auth("alice")
    learner = client.post("/v1/learners", json=LEARNER, headers=headers).json()["id"]
    body = {"learner_id": learner, "stream": "tiny3", "budget": {"trials": 1, "steps": 2}}
    ids = [client.post("/v1/submissions", json=body, headers=headers).json()["id"] for _ in range(2)]
    bobs = client.post("/v1/learners", json={**LEARNER, "name": "nm-bob"}, headers=tokens.auth("bob")).json()["id"]
    other = client.post(
        "/v1/submissions", json={**body, "learner_id": bobs, "phase": "meta_train"}, headers=tokens.auth("bob")
    ).json()["id"]  # alice's quota allows two at once
    engine = make_engine(coord_settings.database_url)
    try:
        with transaction(session_factory(engine)) as session:
            for run, error in zip(ids, (0.25, 0.5), strict=True):
                measured_run(session, submission_id=run, cpu={}, error=error)
        with session_factory(engine)() as session:
            attempts = {run: committed_attempts(session, submission_id=run) for run in ids}
    finally:
        engine.dispose()

    before = client.get(f"/v1/submissions/{ids[0]}", headers=headers).json()["error_interval"]
    assert before["low"] is None and "no stored test predictions" in before["unavailable"]

    store = open_store(coord_settings.store_url)
    kept: dict[int, list[TaskPredictions]] = {}
    for run, wrong in zip(ids, (10, 20), strict=True):
        for order, attempt in sorted(attempts[run].items()):
            blob, predictions = _predictions(wrong)
            store.put_bytes(predictions_key(run, order, attempt), blob)
            if order == 3:  # tiny3's meta-test task: what E averages
                kept.setdefault(run, []).append(predictions)

    read = client.get(f"/v1/submissions/{ids[0]}", headers=headers).json()
    expected = error_interval(kept[ids[0]])
    assert read["e"] == 0.25 and read["error_interval"]["unavailable"] is None
    assert (read["error_interval"]["low"], read["error_interval"]["high"]) == pytest.approx(
        (expected.interval.low, expected.interval.high)
    )
    assert read["error_interval"]["tasks"] == 1 and read["error_interval"]["level"] == 0.95

    compared = client.get("/v1/compare", params={"a": ids[0], "b": ids[1]}, headers=headers)
    assert compared.status_code == 200, compared.text
    doc = compared.json()
    paired = paired_delta(kept[ids[0]], kept[ids[1]])
    assert doc["delta_error"] == pytest.approx(-0.25)
    assert (doc["delta_error_interval"]["low"], doc["delta_error_interval"]["high"]) == pytest.approx(
        (paired.interval.low, paired.interval.high)
    )
    assert [t["order"] for t in doc["tasks"]] == [3] and doc["tasks"][0]["differs"] == paired.tasks[0].differs
    assert doc["delta_cflop"] == 0.0 and doc["delta_cflop_interval"]["low"] == doc["delta_cflop_interval"]["high"]

    refused = client.get("/v1/compare", params={"a": ids[0], "b": other}, headers=headers)
    assert refused.status_code == 422 and "same stream version and phase" in refused.json()["detail"]
    unknown = client.get("/v1/compare", params={"a": ids[0], "b": 99999}, headers=headers)
    assert unknown.status_code == 422 and "No run with id 99999" in unknown.json()["detail"]

    from fastapi.testclient import TestClient

    from services.dashboard.server import create_server_app

    with TestClient(create_server_app(coord_settings)) as pages:
        page = pages.get(f"/submissions/{ids[0]}").text
        assert 'id="e-interval"' in page
        assert f"[{expected.interval.low:.4f}, {expected.interval.high:.4f}]" in page
        assert (
            f"generalisation to other tasks [{expected.generalisation.low:.4f}, {expected.generalisation.high:.4f}]"
        ) in page  # the task-resampled figure, labelled
        shown = pages.get(f"/compare?ids={ids[0]},{ids[1]}").text
        assert 'id="delta-e"' in shown and "−0.2500" not in shown  # printed with a plain minus
        assert f"{-0.25:+.4f} [{paired.interval.low:+.4f}, {paired.interval.high:+.4f}] 95 %" in shown
        assert "Beyond noise" in shown
        board = pages.get("/").text
        assert f"[{expected.interval.low:.4f}, {expected.interval.high:.4f}] 95 %" in board
        spread = np.std([0.25, 0.5], ddof=1)
        assert f"seeds: 0.3750 ± {spread:.4f}" in board  # alice's two runs of one learner

    listed = client.get("/v1/leaderboard", headers=headers).json()
    found = {u["submission_id"]: u for u in listed["uncertainty"]}
    assert (found[ids[0]]["e_low"], found[ids[0]]["e_high"]) == pytest.approx(
        (expected.interval.low, expected.interval.high)
    )
    assert found[ids[0]]["seeds_runs"] == 2 and found[ids[0]]["seeds_sd"] == pytest.approx(spread)
