"""Registering an image learner on the ``kuberay`` backend, through the API: the chart's
coordinator (no podman) takes a digest from the chart's default RayJob template (the image is an
image volume of the learner pods) and records no size; a tag is a 422 asking for the digest; a
template rendered with ``kuberay.learnerImages.delivery=refuse`` (no image volumes) makes every
image a 422 saying so, while bundles stay welcome.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from services.coordinator.app import create_app
from tests.support.helm_chart import render_raw, template_map

LEARNER = f"registry.example.com/lab/learner@sha256:{'d' * 64}"
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _client(coord_settings, folder: Path, values: dict | None) -> TestClient:
    folder.mkdir()
    for name, text in template_map(render_raw(values))["data"].items():
        (folder / name).write_text(text)
    settings = coord_settings.model_copy(
        update={"backend": "kuberay", "kuberay_rayjob_template": folder, "image_learners": "unpack"}
    )
    return TestClient(create_app(settings), raise_server_exceptions=False)


@ON_SQLITE
def test_the_chart_s_coordinator_takes_digests_as_image_volumes(coord_settings, tokens, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-podman"))  # as in the chart's coordinator image
    with _client(coord_settings, tmp_path / "template", None) as client:
        made = client.post(
            "/v1/learners", headers=tokens.auth("alice"), json={"name": "vol", "entrypoint": "m:make", "image": LEARNER}
        )
        assert made.status_code == 201, made.text
        assert (made.json()["image"], made.json()["image_size_bytes"]) == (LEARNER, None)
        tag = client.post(
            "/v1/learners",
            headers=tokens.auth("alice"),
            json={"name": "tag", "entrypoint": "m:make", "image": "registry.example.com/lab/learner:1"},
        )
        assert tag.status_code == 422 and tag.json()["field"] == "image", tag.text
        assert "must be named by digest" in tag.json()["detail"]


@ON_SQLITE
def test_a_cluster_without_image_volumes_refuses_image_learners_by_name(coord_settings, tokens, tmp_path):
    refuse = {"kuberay": {"learnerImages": {"delivery": "refuse"}}}
    with _client(coord_settings, tmp_path / "template", refuse) as client:
        refused = client.post(
            "/v1/learners", headers=tokens.auth("alice"), json={"name": "img", "entrypoint": "m:make", "image": LEARNER}
        )
        assert refused.status_code == 422 and refused.json()["field"] == "image", refused.text
        detail = refused.json()["detail"]
        assert "kuberay.learnerImages.delivery is 'refuse'" in detail and "bundle" in detail
        assert client.get("/v1/learners", headers=tokens.auth("alice")).json()["items"] == []
