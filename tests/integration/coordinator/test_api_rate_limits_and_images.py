"""Per-token write rate limits and the learner image policy, through the real app."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from services.coordinator.app import create_app
from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import ImagePolicy, check_image_policy

LEARNER = {
    "name": "cnn",
    "entrypoint": "my_pkg.learner:make",
    "image": "ghcr.io/team/cnn:1.0",
    "resources": {"cpus": 1, "gpus": 0, "memory_mb": 1024},
}
DIGEST = "sha256:" + "ab" * 32


def _client(settings: CoordinatorSettings, **update) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False)


def test_writes_over_a_tokens_rate_are_429_with_retry_after(coord_settings, tokens):
    with _client(coord_settings, write_rate="3/minute") as client:
        codes = [
            client.post("/v1/learners", json={**LEARNER, "name": f"cnn{i}"}, headers=tokens.auth("alice")).status_code
            for i in range(4)
        ]
        assert codes == [201, 201, 201, 429]
        refused = client.post("/v1/learners", json={**LEARNER, "name": "late"}, headers=tokens.auth("alice"))
        body = refused.json()
        assert refused.headers["content-type"] == "application/problem+json"
        assert body["type"] == "urn:nevis:problem:rate-limited" and "NEVIS_WRITE_RATE" in body["detail"]
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # Another token has its own budget; reads are not counted.
        assert (
            client.post("/v1/learners", json={**LEARNER, "name": "bobs"}, headers=tokens.auth("bob")).status_code == 201
        )
        assert client.get("/v1/learners", headers=tokens.auth("alice")).status_code == 200
        names = [item["name"] for item in client.get("/v1/learners", headers=tokens.auth("admin")).json()["items"]]
        assert sorted(names) == ["bobs", "cnn0", "cnn1", "cnn2"]  # the refused writes wrote nothing


def test_a_flood_without_a_token_is_limited_before_authentication(coord_settings):
    with _client(coord_settings, write_rate="2/minute") as client:
        codes = [client.post("/v1/learners", json=LEARNER).status_code for _ in range(3)]
    assert codes == [401, 401, 429]


def test_the_openapi_document_shows_the_429_on_every_write(coord_settings):
    with _client(coord_settings) as client:
        document = client.get("/openapi.json").json()
    writes = [
        (path, method, op)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if method in ("post", "put", "patch", "delete")
    ]
    assert writes and all("429" in op["responses"] for _, _, op in writes)
    assert all(
        "429" not in op["responses"]
        for ops in document["paths"].values()
        for method, op in ops.items()
        if method == "get"
    )


def test_a_bad_write_rate_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="(?s)write_rate.*rate such as '120/minute'"):
        CoordinatorSettings(data_dir=tmp_path, database_url="sqlite://", write_rate="lots")


def test_images_come_only_from_allowed_registries_and_by_digest_when_required(coord_settings, tokens):
    with _client(
        coord_settings, image_registries="ghcr.io/team, registry.lab:5000", require_image_digest=True
    ) as client:

        def register(name, image):
            return client.post(
                "/v1/learners", json={**LEARNER, "name": name, "image": image}, headers=tokens.auth("alice")
            )

        foreign = register("a", f"docker.io/evil/cnn@{DIGEST}")
        assert foreign.status_code == 422 and foreign.json()["field"] == "image"
        assert "allowed registry" in foreign.json()["detail"]
        sneaky = register("b", f"ghcr.io/teamevil/cnn@{DIGEST}")  # a prefix, not the org
        assert sneaky.status_code == 422
        tagged = register("c", "ghcr.io/team/cnn:1.0")
        assert tagged.status_code == 422 and "digest" in tagged.json()["detail"]
        assert register("d", f"ghcr.io/team/cnn@{DIGEST}").status_code == 201
        assert register("e", f"registry.lab:5000/x/y:2@{DIGEST}").status_code == 201


@pytest.mark.parametrize(
    ("image", "policy", "ok"),
    [
        ("cnn:1.0", ImagePolicy(registries=("docker.io",)), True),  # Docker's default registry
        ("team/cnn:1.0", ImagePolicy(registries=("docker.io/team",)), True),
        ("team/cnn:1.0", ImagePolicy(registries=("docker.io/other",)), False),
        ("localhost:5000/cnn:1.0", ImagePolicy(registries=("ghcr.io",)), False),
        ("ghcr.io/team/cnn:1.0", ImagePolicy(), True),
        ("ghcr.io/team/cnn:1.0", ImagePolicy(require_digest=True), False),
    ],
)
def test_the_image_policy_resolves_registries_as_a_runtime_would(image, policy, ok):
    if ok:
        assert check_image_policy(image, policy) == image
    else:
        with pytest.raises(InvalidInputError):
            check_image_policy(image, policy)


def test_production_requires_digests_by_default(tmp_path):
    development = CoordinatorSettings(data_dir=tmp_path, database_url="sqlite://")
    assert development.image_policy == ImagePolicy()
    pinned = CoordinatorSettings(
        data_dir=tmp_path, database_url="sqlite://", require_image_digest=True, image_registries="ghcr.io/a, ,quay.io"
    )
    assert pinned.image_policy == ImagePolicy(registries=("ghcr.io/a", "quay.io"), require_digest=True)


def test_production_accepts_allow_listed_image_learners_by_digest_as_files_for_the_sandbox(tmp_path):
    url = "postgresql+psycopg://u@h/db"
    production = CoordinatorSettings(
        data_dir=tmp_path, database_url=url, environment="production", sandbox="bwrap", image_registries="ghcr.io/a"
    )
    assert production.image_policy == ImagePolicy(registries=("ghcr.io/a",), require_digest=True)
    assert production.image_learners == "unpack"  # files for the sandbox, never a Ray member
    assert check_image_policy("ghcr.io/a/b@sha256:" + "0" * 64, production.image_policy)
    with pytest.raises(InvalidInputError, match="NEVIS_REQUIRE_IMAGE_DIGEST"):
        check_image_policy("ghcr.io/a/b:1.0", production.image_policy)
    with pytest.raises(InvalidInputError, match="NEVIS_IMAGE_REGISTRIES"):
        check_image_policy("ghcr.io/other/b@sha256:" + "0" * 64, production.image_policy)
