"""``nevis submit --image`` against a real served API: the image is pinned by digest, registered
once (its unpacked size recorded and shown in the learner's detail), re-used, and submitted; a
refusal of the service (an image without the entry point's module) is shown and registers
nothing.

The server is a real uvicorn (no scheduler; SQLite: the client is the subject) on this machine,
with ``NEVIS_IMAGE_LEARNERS=unpack`` (the service's default; the shared API of conftest.py takes
images as labels), so it reads the image from podman's own store. The image is the shared plain
image of tests/support/learner_images.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from services.cli.client import NevisClient
from services.cli.main import app
from services.coordinator.app import create_app
from tests.integration.coordinator.conftest import Tokens, add_user, make_settings, write_stream
from tests.support.browser import served
from tests.support.learner_images import shared_images
from workers.sandbox.images import ImageLimits, unpack_image

pytestmark = [
    pytest.mark.images,
    pytest.mark.parametrize("module_database_url", ["sqlite"], indirect=True, scope="module"),
]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return shared_images(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def server(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Tokens]]:
    """The service's URL, unpacking images as in production, and its users' tokens."""
    root = tmp_path_factory.mktemp("image-api")
    (root / "streams").mkdir()
    write_stream(root / "streams", "tiny2", tasks=2)
    settings = make_settings(module_database_url, root / "data", root / "streams", image_learners="unpack")
    tokens = Tokens(
        admin=add_user(module_database_url, "root", "admin"),
        alice=add_user(module_database_url, "alice", "submitter"),
        bob=add_user(module_database_url, "bob", "submitter"),
    )
    with TestClient(create_app(settings)), served(create_app(settings)) as url:
        yield url, tokens


def test_submit_image_registers_by_digest_records_its_size_and_re_uses_it(
    server, images, monkeypatch, tmp_path
) -> None:
    url, tokens = server
    monkeypatch.setenv("NEVIS_URL", url)
    monkeypatch.setenv("NEVIS_TOKEN", tokens.alice)
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["submit", "--image", images["plain"], "--entrypoint", "nevis_test_learners:cheater", "--stream", "tiny2"]
    args += ["--trials", "1", "--steps", "2", "--no-check", "--detach"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())  # the console wraps long lines
    found = re.search(r"Registered learner (\d+) \(([\w.-]+)\): image (\S+)\.", said)
    assert found, first.output
    learner_id, pinned = int(found[1]), found[3]
    assert pinned.startswith(images["plain"].rsplit(":", 1)[0] + "@sha256:"), pinned
    sub_id = int(re.search(r"Submission (\d+): \S+ on tiny2 test-1 \(meta_test\), queued", said)[1])

    expected = unpack_image(images["plain"], cache=tmp_path / "cache", limits=ImageLimits()).size_bytes
    with NevisClient(url, tokens.alice) as client:
        detail = client.learner(learner_id)
        assert client.submission(sub_id)["learner"]["id"] == learner_id
    assert detail["image"] == pinned and detail["bundle"] is None
    assert detail["image_size_bytes"] == expected > 0  # what registration unpacked, within the caps

    again = runner.invoke(app, [*args, "--private"])
    assert again.exit_code == 0 and f"Re-using learner {learner_id}" in " ".join(again.output.split()), again.output


def test_a_refused_image_is_shown_and_registers_nothing(server, images, monkeypatch) -> None:
    url, tokens = server
    monkeypatch.setenv("NEVIS_URL", url)
    monkeypatch.setenv("NEVIS_TOKEN", tokens.bob)
    refused = CliRunner().invoke(
        app,
        ["submit", "--image", images["plain"], "--entrypoint", "absent_module:make", "--stream", "tiny2"]
        + ["--no-check", "--detach"],
    )
    assert refused.exit_code != 0
    assert "has no module 'absent_module'" in str(refused.exception), refused.output
    with NevisClient(url, tokens.bob) as client:
        assert not list(client.learners()) and client.submissions()["total"] == 0
