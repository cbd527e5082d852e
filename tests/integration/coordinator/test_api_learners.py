"""Registering learners over the API: images + entry points, uploaded bundles, strict checks."""

from __future__ import annotations

import hashlib
import io
import random
import tarfile
import zipfile

import pytest

from services.store.objects import open_store

GOOD = {
    "name": "cnn",
    "entrypoint": "my_pkg.learner:make",
    "image": "ghcr.io/team/cnn:1.0",
    "resources": {"cpus": 2, "gpus": 1, "memory_mb": 4096},
}


def _targz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _wheel(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _upload(client, headers, payload: bytes, filename: str, **form):
    data = {"name": "bundled", "entrypoint": "pkg.learner:make", **form}
    return client.post(
        "/v1/learners/bundle",
        headers=headers,
        data=data,
        files={"file": (filename, payload, "application/octet-stream")},
    )


def test_register_an_image_learner(client, tokens):
    response = client.post("/v1/learners", json=GOOD, headers=tokens.auth("alice"))
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["name"], body["owner"], body["image"], body["bundle"]) == ("cnn", "alice", GOOD["image"], None)
    assert body["resources"] == {"cpus": 2.0, "gpus": 1, "memory_mb": 4096}
    again = client.post("/v1/learners", json=GOOD, headers=tokens.auth("bob"))
    assert again.status_code == 409 and again.json()["field"] == "name"
    assert client.get(f"/v1/learners/{body['id']}", headers=tokens.auth("bob")).status_code == 404
    assert client.get(f"/v1/learners/{body['id']}", headers=tokens.auth("admin")).json()["owner"] == "alice"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": "ghcr.io/team/cnn"}, "image"),  # unpinned
        ({"image": "ghcr.io/team/cnn:latest"}, "image"),
        ({"image": "ghcr.io/Team/cnn:1.0"}, "image"),  # upper case in the path
        ({"image": "cnn:1.0@sha256:abc"}, "image"),  # digest too short
        ({"image": "two words:1"}, "image"),
        ({"entrypoint": "my_pkg.learner"}, "entrypoint"),
        ({"entrypoint": "my-pkg:make"}, "entrypoint"),
        ({"entrypoint": "class:make"}, "entrypoint"),
        ({"name": "../etc"}, "name"),
        ({"name": ""}, "name"),
        ({"resources": {"cpus": 0}}, "resources.cpus"),
        ({"resources": {"gpus": 65}}, "resources.gpus"),
        ({"resources": {"memory_mb": 1}}, "resources.memory_mb"),
        ({"resources": {"cpus": "many"}}, "resources.cpus"),
        ({"resources": {"disk": 1}}, "resources.disk"),
        ({"imagee": "x:1"}, "imagee"),
        ({"name": None}, "name"),
    ],
)
def test_invalid_learner_fields_are_422_naming_the_field(shared_api, change, field):
    response = shared_api.client.post("/v1/learners", json={**GOOD, **change}, headers=shared_api.tokens.auth("alice"))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["field"] == field
    assert field.split(".")[-1] in response.json()["detail"]


def test_upload_a_bundle_stores_it_with_its_checksum(client, tokens, coord_settings):
    payload = _targz({"pkg-1.0/pkg/__init__.py": b"", "pkg-1.0/pkg/learner.py": b"def make(): ...\n"})
    response = _upload(client, tokens.auth("alice"), payload, "pkg-1.0.tar.gz", cpus="0.5")
    assert response.status_code == 201, response.text
    bundle = response.json()["bundle"]
    assert bundle["sha256"] == hashlib.sha256(payload).hexdigest()
    assert bundle["size_bytes"] == len(payload)
    assert response.json()["resources"]["cpus"] == 0.5
    store = open_store(coord_settings.store_url)
    assert store.get_bytes(bundle["key"]) == payload
    wheel = _upload(
        client, tokens.auth("alice"), _wheel({"pkg/learner.py": b"x = 1\n"}), "pkg-1.0-py3-none-any.whl", name="wheeled"
    )
    assert wheel.status_code == 201, wheel.text


@pytest.mark.parametrize(
    ("payload", "filename", "form", "field"),
    [
        (b"not an archive", "x.tar.gz", {}, "file"),
        (b"PK\x03\x04garbage", "x.whl", {}, "file"),
        (_targz({"a.py": b""}), "x.exe", {}, "file"),
        (_targz({"../evil.py": b""}), "x.tar.gz", {}, "file"),
        (_targz({"/abs/evil.py": b""}), "x.tgz", {}, "file"),
        (_wheel({"pkg/../../evil.py": b""}), "x.zip", {}, "file"),
        (_targz({"README.md": b"no code"}), "x.tar.gz", {}, "file"),
        (_targz({"a.py": b""}), "x.tar.gz", {"entrypoint": "nope"}, "entrypoint"),
        (_targz({"a.py": b""}), "x.tar.gz", {"gpus": "lots"}, "gpus"),
        (_targz({"a.py": b""}), "x.tar.gz", {"memory_mb": "1"}, "resources.memory_mb"),
    ],
)
def test_bad_bundles_are_422_naming_the_field(shared_api, payload, filename, form, field):
    response = _upload(shared_api.client, shared_api.tokens.auth("alice"), payload, filename, **form)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


def test_a_symlink_in_a_bundle_is_refused(shared_api):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("pkg/a.py")
        archive.addfile(info, io.BytesIO(b""))
        link = tarfile.TarInfo("pkg/secrets.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    response = _upload(shared_api.client, shared_api.tokens.auth("alice"), buffer.getvalue(), "x.tar.gz")
    assert response.status_code == 422 and "link" in response.json()["detail"]


def test_oversized_and_unsized_uploads_are_refused_before_reading(coord_settings, tokens, kit):
    from fastapi.testclient import TestClient

    from services.coordinator.app import create_app

    small = coord_settings.model_copy(update={"bundle_max_bytes": 2048})
    with TestClient(create_app(small), raise_server_exceptions=False) as client:
        noise = random.Random(0).randbytes
        for size in (10_000, 100_000):  # counted while reading; refused by Content-Length
            big = _targz({"a.py": noise(size)})
            response = _upload(client, tokens.auth("alice"), big, "big.tar.gz")
            assert response.status_code == 413, response.text
            assert response.json()["field"] == "file" and "2048" in response.json()["detail"]

        def chunks():
            yield b"--x\r\n"

        unsized = client.post(
            "/v1/learners/bundle",
            headers={**tokens.auth("alice"), "content-type": "multipart/form-data; boundary=x"},
            content=chunks(),
        )
        assert unsized.status_code == 411 and unsized.json()["field"] == "Content-Length"
    assert kit.query(coord_settings.database_url, "SELECT count(*) FROM learners")[0][0] == 0


def test_learners_are_listed_per_owner_with_pagination(client, tokens):
    for i in range(3):
        assert (
            client.post("/v1/learners", json={**GOOD, "name": f"a{i}"}, headers=tokens.auth("alice")).status_code == 201
        )
    client.post("/v1/learners", json={**GOOD, "name": "b0"}, headers=tokens.auth("bob"))
    page = client.get("/v1/learners?limit=2&offset=1", headers=tokens.auth("alice")).json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 1)
    assert [item["name"] for item in page["items"]] == ["a1", "a0"]
    assert client.get("/v1/learners", headers=tokens.auth("admin")).json()["total"] == 4
    bad = client.get("/v1/learners?limit=0", headers=tokens.auth("alice"))
    assert bad.status_code == 422 and bad.json()["field"] == "limit"
