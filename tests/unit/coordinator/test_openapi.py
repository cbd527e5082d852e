"""The checked-in OpenAPI document is the app's (CI fails when they disagree)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.coordinator.openapi import openapi_document, render

CHECKED_IN = Path(__file__).resolve().parents[3] / "api_schema" / "openapi.json"


@pytest.fixture(scope="module")
def document():
    return openapi_document()


def test_the_checked_in_document_matches_the_app(document):
    assert CHECKED_IN.read_text(encoding="utf-8") == render(document), (
        "api_schema/openapi.json is out of date: run `nevis openapi` and commit the result"
    )


def test_every_v1_operation_needs_a_token_and_documents_problems(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not path.startswith("/v1"):
                assert "security" not in operation, (method, path)
                continue
            assert operation["security"] == [{"ApiToken": []}], (method, path)
            errors = {code: r for code, r in operation["responses"].items() if code.startswith(("4", "5"))}
            assert "401" in errors, (method, path)
            for code, response in errors.items():
                assert "application/problem+json" in response["content"], (method, path, code)
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert set(document["components"]["schemas"]["Problem"]["required"]) == {"type", "title", "status", "detail"}


def test_the_document_lists_the_routes_of_the_issue(document):
    operations = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    assert {
        ("POST", "/v1/learners"),
        ("POST", "/v1/learners/bundle"),
        ("POST", "/v1/submissions"),
        ("GET", "/v1/submissions"),
        ("GET", "/v1/submissions/{submission_id}"),
        ("POST", "/v1/submissions/{submission_id}/cancel"),
        ("GET", "/v1/submissions/{submission_id}/events"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    } <= operations
    create = document["paths"]["/v1/submissions"]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in create["parameters"])
    json.dumps(document)  # serialisable as is


def test_the_document_lists_503_413_and_the_idempotent_replay(document):
    """Issue 13: database unavailability (503), body limits (413) and the 200 of a replay."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path.startswith("/v1"):
                assert "503" in operation["responses"], (method, path)
            if method in ("post", "put", "patch", "delete"):  # every body is size-limited
                assert "413" in operation["responses"], (method, path)
    assert "503" in document["paths"]["/readyz"]["get"]["responses"]
    create = document["paths"]["/v1/submissions"]["post"]["responses"]
    assert {"200", "201"} <= set(create)
    schema = {code: create[code]["content"]["application/json"]["schema"] for code in ("200", "201")}
    assert schema["200"] == schema["201"]
    assert "Idempotent-Replayed" in create["200"]["headers"]
    learner = document["paths"]["/v1/learners/{learner_id}"]["get"]["parameters"][0]["schema"]
    assert (learner["minimum"], learner["maximum"]) == (1, 2**31 - 1)
