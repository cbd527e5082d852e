"""Submissions over the API: create, validation, idempotency, quotas, list, cancel, events."""

from __future__ import annotations

import threading

import pytest

LEARNER = {"name": "nm", "entrypoint": "nevis_test_learners:nearest_mean"}


def _learner(client, headers, name: str = "nm") -> int:
    response = client.post("/v1/learners", json={**LEARNER, "name": name}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _body(learner_id: int, **extra):
    return {"learner_id": learner_id, "stream": "tiny2", "budget": {"trials": 1, "steps": 2}, **extra}


def test_create_then_read_a_submission(client, tokens, kit, coord_settings):
    learner = _learner(client, tokens.auth("alice"))
    created = client.post("/v1/submissions", json=_body(learner, phase="meta_train"), headers=tokens.auth("alice"))
    assert created.status_code == 201, created.text
    body = created.json()
    assert created.headers["location"] == f"/v1/submissions/{body['id']}"
    assert (body["status"], body["cursor"], body["owner"], body["phase"]) == ("queued", 1, "alice", "meta_train")
    assert body["stream"] == {"name": "tiny2", "version": "test-1"}
    assert body["budget"]["trials"] == 1 and "stream_ref" not in body["budget"] and body["image_size"] == 16
    assert [t["status"] for t in body["tasks"]] == ["pending"]  # meta_train: the first task only
    assert (body["e"], body["cflop"], body["headline_tasks"], body["current_task"]) == (None, 0.0, 1, None)
    assert (body["cpu_seconds"], body["floored_tasks"], body["flops_floored"]) == (None, 0, False)  # unknown, not 0
    assert (body["tasks"][0]["cpu_seconds"], body["tasks"][0]["flops_floored"]) == (None, False)
    read = client.get(f"/v1/submissions/{body['id']}", headers=tokens.auth("alice")).json()
    assert read["id"] == body["id"] and read["tasks"] == body["tasks"]
    rows = kit.query(
        coord_settings.database_url,
        "SELECT s.status, o.user_id FROM submissions s JOIN scheduled_submissions o ON o.submission_id = s.id",
    )
    assert rows == [("queued", 2)]


def test_a_read_submission_shows_harness_measured_cpu_and_the_floor(client, tokens, coord_settings, measured_run):
    """Committed tasks carry the CPU seconds the harness measured (null where it could not) and
    whether the floor was charged; the run totals them (null only when no task was measured)."""
    from services.store.db import make_engine, session_factory, transaction

    learner = _learner(client, tokens.auth("alice"))
    created = client.post("/v1/submissions", json=_body(learner), headers=tokens.auth("alice")).json()
    engine = make_engine(coord_settings.database_url)
    try:
        with transaction(session_factory(engine)) as session:
            measured_run(session, submission_id=created["id"], cpu={2: (7.25, True)})
    finally:
        engine.dispose()
    body = client.get(f"/v1/submissions/{created['id']}", headers=tokens.auth("alice")).json()
    assert [(t["order"], t["cpu_seconds"], t["flops_floored"]) for t in body["tasks"]] == [
        (1, None, False),
        (2, 7.25, True),
    ]
    assert (body["cpu_seconds"], body["floored_tasks"], body["flops_floored"]) == (7.25, 1, True)
    assert body["flops_sources"] == ["floor", "measured"] and body["cflop"] == 1e6 + 2e7  # the floor: 10x
    assert [t["flops_per_cpu_second"] for t in body["tasks"]] == [None, 2e7 / 7.25]  # what each row's count implies


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"stream": "tiny"}, "stream", "Did you mean"),
        ({"stream": "../../etc/passwd"}, "stream", "letters, digits"),
        ({"stream_version": "9"}, "stream_version", "test-1"),
        ({"phase": "meta_dev"}, "phase", "meta_train"),
        ({"budget": {"trials": 0}}, "budget.trials", "greater than or equal to 1"),
        ({"budget": {"trials": 10**5}}, "budget.trials", "less than or equal to 10000"),
        ({"budget": {"steps": 10**12}}, "budget.steps", "steps"),
        ({"budget": {"flop_cap": -1}}, "budget.flop_cap", "greater than 0"),
        ({"budget": {"trials": "four"}}, "budget.trials", "integer"),
        ({"budget": {"trials": True}}, "budget.trials", "integer"),
        ({"budget": {"trails": 4}}, "budget.trails", "Extra inputs"),
        ({"budget": {"checkpoint_fractions": [2.0]}}, "budget.checkpoint_fractions", "less than or equal to 1"),
        ({"budget": {"checkpoint_fractions": [0.5] * 65}}, "budget.checkpoint_fractions", "at most 64"),
        ({"budget": {"search": "gp-ucb"}}, "budget.search", "Did you mean 'gp_ucb'? Known: gp_ucb, random"),
        ({"budget": {"scheduler": 3}}, "budget.scheduler", "'asha', 'fifo' or 'proxy'"),
        ({"learner_id": "abc"}, "learner_id", "integer"),
        ({"learner_id": 999}, "learner_id", "No learner"),
        ({"image_size": 3}, "image_size", "image_size"),
        ({"colour": "red"}, "colour", "Extra inputs"),
        ({"code_url": "http://github.com/me/x"}, "code_url", "https://"),
        ({"code_url": "javascript:alert(1)"}, "code_url", "https://"),
        ({"code_url": "https://me:secret@github.com/me/x"}, "code_url", "without a user name"),
        ({"code_url": "https://github.com/me/my learner"}, "code_url", "without spaces"),
        ({"code_url": "https://localhost/x"}, "code_url", "host name"),
        ({"code_url": "https://github.com/" + "x" * 500}, "code_url", "500"),
        ({"code_url": 7}, "code_url", "string"),
    ],
)
def test_invalid_submissions_are_4xx_naming_the_field(shared_api, change, field, words):
    client, tokens = shared_api.client, shared_api.tokens
    learner = client.get("/v1/learners", headers=tokens.auth("alice")).json()["items"]
    learner_id = learner[0]["id"] if learner else _learner(client, tokens.auth("alice"))
    response = client.post("/v1/submissions", json={**_body(learner_id), **change}, headers=tokens.auth("alice"))
    assert 400 <= response.status_code < 500, response.text
    problem = response.json()
    assert problem["field"] == field and words in problem["detail"], problem
    assert response.headers["content-type"] == "application/problem+json"


def test_a_code_url_is_kept_and_marks_which_runs_have_public_code(client, tokens, monkeypatch):
    """A submission may say where its learner's code is public, when submitted or later; the
    leaderboard's rows carry it, and one without (not a baseline) is marked code-not-public."""
    from services.coordinator.api import answers

    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 0.0)  # the leaderboard sees each change at once
    learner = _learner(client, tokens.auth("alice"))
    url = "https://github.com/alice/nm-learner/tree/v1"
    public = client.post("/v1/submissions", json=_body(learner, code_url=url), headers=tokens.auth("alice"))
    closed = client.post("/v1/submissions", json=_body(learner), headers=tokens.auth("alice"))
    assert public.status_code == closed.status_code == 201, public.text + closed.text
    assert (public.json()["code_url"], closed.json()["code_url"]) == (url, None)
    assert client.get(f"/v1/submissions/{public.json()['id']}", headers=tokens.auth("alice")).json()["code_url"] == url
    items = {i["submission_id"]: i for i in client.get("/v1/leaderboard").json()["items"]}
    assert (items[public.json()["id"]]["code_url"], items[public.json()["id"]]["code_public"]) == (url, True)
    assert (items[closed.json()["id"]]["code_url"], items[closed.json()["id"]]["code_public"]) == (None, False)
    later = client.post(
        f"/v1/submissions/{closed.json()['id']}/code-url", json={"code_url": url}, headers=tokens.auth("alice")
    )  # published after the run
    assert later.status_code == 200 and later.json()["code_url"] == url, later.text
    assert {i["submission_id"]: i["code_public"] for i in client.get("/v1/leaderboard").json()["items"]}[
        closed.json()["id"]
    ] is True
    bad = client.post(
        f"/v1/submissions/{closed.json()['id']}/code-url",
        json={"code_url": "ftp://x.org/a"},
        headers=tokens.auth("alice"),
    )
    assert bad.status_code == 422 and bad.json()["field"] == "code_url"
    foreign = client.post(
        f"/v1/submissions/{closed.json()['id']}/code-url", json={"code_url": None}, headers=tokens.auth("bob")
    )
    assert foreign.status_code == 404  # not bob's
    withdrawn = client.post(
        f"/v1/submissions/{public.json()['id']}/code-url", json={"code_url": None}, headers=tokens.auth("alice")
    )
    assert withdrawn.status_code == 200 and withdrawn.json()["code_url"] is None
    kinds = [
        e["kind"]
        for e in client.get(f"/v1/submissions/{public.json()['id']}/events", headers=tokens.auth("alice")).json()[
            "items"
        ]
    ]
    assert kinds[-1] == "submission.code_url"


@pytest.mark.parametrize("payload", [b"{not json", b"[]", b"null", b'{"learner_id": 1, "stream": "tiny2"'])
def test_malformed_bodies_are_422(shared_api, payload):
    response = shared_api.client.post(
        "/v1/submissions",
        content=payload,
        headers={**shared_api.tokens.auth("alice"), "content-type": "application/json"},
    )
    assert response.status_code == 422 and response.json()["field"]


def test_unknown_routes_and_methods_are_problems(shared_api):
    missing = shared_api.client.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    wrong = shared_api.client.put("/v1/submissions", headers=shared_api.tokens.auth("alice"))
    assert wrong.status_code == 405 and wrong.json()["status"] == 405
    gone = shared_api.client.get("/v1/submissions/987654", headers=shared_api.tokens.auth("admin"))
    assert gone.status_code == 404 and gone.json()["field"] == "submission_id"


def test_idempotency_key_replays_and_refuses_a_different_body(client, tokens, kit, coord_settings):
    learner = _learner(client, tokens.auth("alice"))
    headers = {**tokens.auth("alice"), "Idempotency-Key": "run-42"}
    first = client.post("/v1/submissions", json=_body(learner), headers=headers)
    again = client.post("/v1/submissions", json=_body(learner), headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again.headers["idempotent-replayed"] == "true"
    other = client.post("/v1/submissions", json=_body(learner, phase="meta_train"), headers=headers)
    assert other.status_code == 409 and other.json()["field"] == "Idempotency-Key"
    bad = client.post("/v1/submissions", json=_body(learner), headers={**headers, "Idempotency-Key": "a b"})
    assert bad.status_code == 422 and bad.json()["field"] == "Idempotency-Key"
    assert kit.query(coord_settings.database_url, "SELECT count(*) FROM submissions")[0][0] == 1


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_concurrent_requests_with_one_key_make_one_submission(client, tokens, kit, coord_settings):
    learner = _learner(client, tokens.auth("alice"))
    headers = {**tokens.auth("alice"), "Idempotency-Key": "burst"}
    results: list[int] = []
    barrier = threading.Barrier(6)

    def post() -> None:
        barrier.wait()
        response = client.post("/v1/submissions", json=_body(learner), headers=headers)
        results.append(response.json().get("id", response.status_code))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and isinstance(results[0], int), results
    assert kit.query(coord_settings.database_url, "SELECT count(*) FROM submissions")[0][0] == 1


def test_quotas_refuse_with_429_naming_the_quota(client, coord_settings, tokens, kit):
    capped = {
        "Authorization": "Bearer "
        + kit.add_user(coord_settings.database_url, "carol", "submitter", max_concurrent=1, max_per_day=2)
    }
    learner = _learner(client, capped, "carol-nm")
    first = client.post("/v1/submissions", json=_body(learner), headers=capped)
    assert first.status_code == 201
    busy = client.post("/v1/submissions", json=_body(learner), headers=capped)
    assert busy.status_code == 429 and busy.json()["field"] == "quota.concurrent"
    assert int(busy.headers["retry-after"]) > 0
    assert client.post(f"/v1/submissions/{first.json()['id']}/cancel", headers=capped).status_code == 200
    second = client.post("/v1/submissions", json=_body(learner), headers=capped)
    assert second.status_code == 201
    client.post(f"/v1/submissions/{second.json()['id']}/cancel", headers=capped)
    daily = client.post("/v1/submissions", json=_body(learner), headers=capped)
    assert daily.status_code == 429 and daily.json()["field"] == "quota.daily"
    assert 0 < int(daily.headers["retry-after"]) <= 86_401
    # Other users are not affected by carol's quota.
    alice_learner = _learner(client, tokens.auth("alice"))
    assert client.post("/v1/submissions", json=_body(alice_learner), headers=tokens.auth("alice")).status_code == 201


def test_list_filters_and_paginates(client, tokens):
    alice = tokens.auth("alice")
    learner = _learner(client, alice)
    ids = [
        client.post("/v1/submissions", json=_body(learner, phase=phase), headers=alice).json()["id"]
        for phase in ("meta_test", "meta_train")
    ]
    client.post(f"/v1/submissions/{ids[0]}/cancel", headers=alice)
    page = client.get("/v1/submissions?limit=1", headers=alice).json()
    assert (page["total"], [s["id"] for s in page["items"]]) == (2, [ids[1]])
    assert [s["id"] for s in client.get("/v1/submissions?limit=1&offset=1", headers=alice).json()["items"]] == [ids[0]]
    cancelled = client.get("/v1/submissions?status=cancelled", headers=alice).json()
    assert [s["id"] for s in cancelled["items"]] == [ids[0]]
    assert client.get("/v1/submissions?phase=meta_train", headers=alice).json()["total"] == 1
    assert client.get(f"/v1/submissions?learner_id={learner}", headers=alice).json()["total"] == 2
    assert client.get("/v1/submissions?owner=alice", headers=tokens.auth("admin")).json()["total"] == 2
    assert client.get("/v1/submissions?owner=alice", headers=tokens.auth("bob")).json()["total"] == 0
    bad = client.get("/v1/submissions?status=done", headers=alice)
    assert bad.status_code == 422 and bad.json()["field"] == "status"


def test_cancel_is_final_and_logged(client, tokens):
    alice = tokens.auth("alice")
    sub = client.post("/v1/submissions", json=_body(_learner(client, alice)), headers=alice).json()
    cancelled = client.post(f"/v1/submissions/{sub['id']}/cancel", headers=alice)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["finished_at"] is not None
    again = client.post(f"/v1/submissions/{sub['id']}/cancel", headers=alice)
    assert again.status_code == 409 and again.json()["field"] == "status"
    events = client.get(f"/v1/submissions/{sub['id']}/events", headers=alice).json()
    kinds = [e["kind"] for e in events["items"]]
    assert kinds == ["submission.created", "submission.queued", "submission.cancelled"]
    assert events["items"][2]["payload"] == {"by": "alice"}
    later = client.get(f"/v1/submissions/{sub['id']}/events?after={events['items'][1]['id']}", headers=alice).json()
    assert [e["kind"] for e in later["items"]] == ["submission.cancelled"]
    assert later["next_after"] == events["items"][2]["id"]


def test_probe_results_are_readable_by_the_owner_only(client, tokens):
    alice = tokens.auth("alice")
    sub = client.post("/v1/submissions", json=_body(_learner(client, alice)), headers=alice).json()
    report = client.get(f"/v1/submissions/{sub['id']}/probes", headers=alice)
    assert report.status_code == 200
    body = report.json()
    assert body["submission_id"] == sub["id"] and body["settings_hash"] is None  # nothing probed yet
    assert client.get(f"/v1/submissions/{sub['id']}/probes", headers=tokens.auth("bob")).status_code == 404
    bad = client.get(f"/v1/submissions/{sub['id']}/probes?task=0", headers=alice)
    assert bad.status_code == 422 and bad.json()["field"] == "task"
