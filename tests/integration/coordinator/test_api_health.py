"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi.testclient import TestClient

from services.coordinator.app import create_app


def test_healthz_and_readyz_on_a_current_database(shared_api):
    assert shared_api.client.get("/healthz").json() == {"status": "ok"}
    ready = shared_api.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok"}


def test_readyz_is_503_on_a_database_without_schema(empty_database_url, tmp_path, kit):
    settings = kit.make_settings(empty_database_url, tmp_path / "data", tmp_path)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.headers["content-type"] == "application/problem+json"
    assert ready.json()["checks"]["database"] != "ok"


def test_metrics_count_requests_by_route_and_report_the_queue(shared_api):
    client, tokens = shared_api.client, shared_api.tokens
    client.get("/v1/submissions/424242", headers=tokens.auth("alice"))
    text = client.get("/metrics").text
    assert 'nevis_http_requests_total{method="GET",route="/v1/submissions/{submission_id}",status="404"}' in text
    assert "nevis_http_request_duration_seconds_bucket" in text
    assert 'nevis_submissions{status="queued"}' in text
    assert "nevis_task_leases_active 0.0" in text
