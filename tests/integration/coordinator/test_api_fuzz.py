"""A bounded schemathesis run over the whole OpenAPI document: no 5xx, no schema violation.

Why: the edge tests (test_api_edge_validation.py) pin the hostile inputs someone thought of;
this test derives inputs from the OpenAPI document itself, for every operation, and checks
every response against that same document, so an undocumented status code, a response that
breaks its schema, or a 500 on some input nobody thought of fails CI.

For every operation of the app's document (checked in as api_schema/openapi.json) it
sends:
- the document's own examples;
- the coverage cases schemathesis derives from the schema: boundary values, missing and
  wrong-typed fields, out-of-range integers, bad patterns, unexpected methods (positive and
  negative);
- Hypothesis-generated requests, positive (valid by the schema) and negative (not), and again
  with the path parameters naming rows that exist (random ids rarely do).

Most requests carry a valid admin token, so that the fuzzer gets past authentication; some a
submitter's token (403s) or none (401s). A learner and a queued submission exist beforehand.

Every response must pass schemathesis's checks: not a server error (no 5xx and no exception),
a status code the document lists for the operation, a documented content type, the documented
response headers, and a body valid against the documented schema. The test fails listing every
(shrunk) counterexample, or when fewer than ``MIN_REQUESTS`` requests were made.

Bounded and reproducible: Hypothesis is derandomised and ``FUZZ_EXAMPLES`` caps each stage, so
a run is about 2,600 requests and well under a minute per dialect on an idle 2-core machine (both
dialects: SQLite and PostgreSQL). ``NEVIS_FUZZ_EXAMPLES=200`` makes a longer local hunt.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, Verbosity
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.python.asgi import get_client
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.crud import users
from services.store.db import transaction

BASE_URL = "http://testserver"
MIN_REQUESTS = 1000
"""The fewest requests a run must make (per dialect)."""
FUZZ_EXAMPLES = int(os.environ.get("NEVIS_FUZZ_EXAMPLES", "25"))
"""Hypothesis examples per operation and stage (fewer where the input space is smaller)."""
DOC_EXAMPLES = 5
"""Requests built from the document's own examples, per operation."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
WHO = ("admin", "admin", "admin", "admin", "alice", None)
"""Whose token a generated request carries: mostly the admin's, to get past authentication."""
SETTINGS = hypothesis.settings(
    deadline=None,
    database=None,
    derandomize=True,
    verbosity=Verbosity.quiet,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
    report_multiple_bugs=False,
)


@dataclass
class Identities:
    """The admin's (root) and a submitter's (alice) tokens, minted anew when the fuzzer revokes
    them: DELETE /v1/tokens/1 or POST /v1/users/alice/disable are valid requests."""

    sessions: sessionmaker[Session]
    secrets: dict[str, str]

    def headers(self, who: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secrets[who]}"} if who else {}

    def renew(self) -> None:
        with transaction(self.sessions) as session:
            for who, name in (("admin", "root"), ("alice", "alice")):
                user = users.get_user(session, name=name)
                users.enable_user(session, user=user)
                self.secrets[who] = users.create_token(session, user=user, label="fuzz")[1]


@dataclass
class Run:
    """Sends cases to the app, validates each response and counts requests and statuses."""

    session: object  # schemathesis's ASGI session; the app's lifespan is the client fixture's
    identities: Identities
    sent: Counter = field(default_factory=Counter)  # operation label -> requests
    statuses: Counter = field(default_factory=Counter)  # (label, status code) -> responses

    def send(self, case: schemathesis.Case, who: str | None) -> None:
        label, headers = case.operation.label, self.identities.headers(who)
        self.sent[label] += 1
        try:
            response = case.call(base_url=BASE_URL, session=self.session, headers=headers)
        except Exception as exc:  # the app raised: the client would have had a 500
            raise AssertionError(
                f"{label} raised {type(exc).__name__}: {exc} (a 500). Reproduce with:\n"
                f"{case.as_curl_command(headers, base_url=BASE_URL)}"
            ) from exc
        self.statuses[label, response.status_code] += 1
        if response.status_code < 300 and _may_revoke(case):
            self.identities.renew()
        case.validate_response(response, checks=CHECKS, headers=headers)

    def summary(self) -> str:
        return "\n".join(
            f"  {label}: {n} ("
            + ", ".join(f"{code}x{count}" for (op, code), count in sorted(self.statuses.items()) if op == label)
            + ")"
            for label, n in sorted(self.sent.items())
        )


def _may_revoke(case: schemathesis.Case) -> bool:
    return case.path.endswith("/disable") or (
        case.method.upper() == "DELETE" and case.path.endswith("/tokens/{token_id}")
    )


def _fuzz(run: Run, strategy: st.SearchStrategy, examples: int) -> None:
    @hypothesis.settings(SETTINGS, max_examples=examples)
    @hypothesis.given(case=strategy, who=st.sampled_from(WHO))
    def fuzz(case: schemathesis.Case, who: str | None) -> None:
        run.send(case, who)

    fuzz()


def _coverage(run: Run, schema, operation) -> None:
    config = schema.config.generation_for(operation=operation, phase="coverage")
    cases = schema.iter_coverage_cases(operation, generation_modes=list(GenerationMode), generation_config=config)
    for index, case in enumerate(cases):
        run.send(case, WHO[index % len(WHO)])


def _stages(run: Run, schema, operation, rows: dict[str, int | str]) -> Iterator[tuple[str, Callable[[], None]]]:
    """(name, action) for each way ``operation`` is exercised."""
    examples = operation.get_strategies_from_examples()
    if examples:
        yield "document examples", lambda: _fuzz(run, st.one_of(examples), DOC_EXAMPLES)
    yield "coverage", lambda: _coverage(run, schema, operation)
    # An operation without parameters or a body has no schema-violating request to make.
    has_inputs = bool(list(operation.iter_parameters()) or operation.body)
    for mode in GenerationMode if has_inputs else [GenerationMode.POSITIVE]:
        yield (
            f"{mode.value} fuzzing",
            lambda mode=mode: _fuzz(run, operation.as_strategy(generation_mode=mode), FUZZ_EXAMPLES),
        )
    known = {p.name: rows[p.name] for p in operation.path_parameters if p.name in rows}
    if known:
        yield (
            "fuzzing on existing rows",
            lambda: _fuzz(run, operation.as_strategy(path_parameters=known), FUZZ_EXAMPLES),
        )


def _existing_rows(client, tokens) -> dict[str, int | str]:
    """A learner and a queued submission of alice's; path parameters that name real rows."""
    alice, admin = tokens.auth("alice"), tokens.auth("admin")
    learner = client.post(
        "/v1/learners", headers=alice, json={"name": "fuzzed", "entrypoint": "nevis_test_learners:nearest_mean"}
    )
    assert learner.status_code == 201, learner.text
    submission = client.post(
        "/v1/submissions", headers=alice, json={"learner_id": learner.json()["id"], "stream": "tiny2"}
    )
    assert submission.status_code == 201, submission.text
    bob_tokens = client.get("/v1/users/bob/tokens", headers=admin)
    assert bob_tokens.status_code == 200, bob_tokens.text
    return {
        "learner_id": learner.json()["id"],
        "submission_id": submission.json()["id"],
        "name": "bob",
        "token_id": bob_tokens.json()[0]["id"],
    }


# PostgreSQL, the production database (its integer and text limits are the stricter); SQLite's
# edges are test_api_edge_validation.py's, on both dialects.
@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_every_operation_conforms_to_the_openapi_document(client, tokens):
    started = time.monotonic()
    rows = _existing_rows(client, tokens)
    schema = schemathesis.openapi.from_dict(client.app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 25, [op.label for op in operations]
    identities = Identities(client.app.state.sessions, {"admin": tokens.admin, "alice": tokens.alice})
    run = Run(get_client(client.app), identities)  # not entered: no second lifespan
    failures = []
    for operation in operations:
        for stage, action in _stages(run, schema, operation, rows):
            try:
                action()
            except (Exception, FailureGroup) as exc:  # noqa: BLE001 - each is reported below
                failures.append(f"{operation.label} ({stage}):\n{exc}")
    total = sum(run.sent.values())
    report = f"{total} requests in {time.monotonic() - started:.0f} s:\n{run.summary()}"
    print(f"\n{report}")
    assert not failures, "\n\n".join(failures) + f"\n\n{report}"
    assert total >= MIN_REQUESTS, report
    assert all(run.sent[op.label] for op in operations), report
