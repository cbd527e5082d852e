"""The researcher's side of learner images: ``nevis init learner --image`` writes a Containerfile
that podman builds, and ``nevis check --image`` runs the protocol calls on the image's files in
the sandbox: it passes the built image and fails a broken one naming why.

The images are the shared ones of tests/support/learner_images.py (built once per test process);
the init learner's image is built ``FROM`` the shared plain image (``--build-arg LEARNER_BASE``),
a one-layer ``COPY`` instead of the real learner base (the worker image: gigabytes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.check import diagnosis as dx
from services.cli.main import app
from tests.support.learner_images import podman, shared_images

pytestmark = pytest.mark.images


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return shared_images(tmp_path_factory.mktemp("images"))


def test_init_image_writes_a_containerfile_podman_builds_and_check_passes_it(images, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(app, ["init", "learner", "img-learner", "--image"])
    assert made.exit_code == 0, made.output
    folder = tmp_path / "img-learner"
    assert sorted(p.name for p in folder.iterdir()) == [
        "Containerfile",
        "README.md",
        "img_learner.py",
        "test_img_learner.py",
    ]
    containerfile = (folder / "Containerfile").read_text()
    assert "ARG LEARNER_BASE=localhost/nevis-learner-base:" in containerfile
    assert "FROM ${LEARNER_BASE}\nCOPY img_learner.py /opt/learner/\n" in containerfile
    tag = f"{images['plain'].rsplit(':', 1)[0]}-init:1"
    podman("build", "-q", "--network", "none", "--build-arg", f"LEARNER_BASE={images['plain']}", "-t", tag, str(folder))
    try:
        checked = runner.invoke(app, ["check", "--image", tag, "--entrypoint", "img_learner:make", "--steps", "4"])
    finally:
        podman("rmi", "-f", tag)
    assert checked.exit_code == 0, checked.output
    for call in dx.CALLS:
        assert call in checked.output
    assert "@sha256:" in checked.output  # the check names the image by digest, as it would register
    assert "FAIL" not in checked.output and "Every protocol call works" in checked.output


@pytest.mark.parametrize(
    ("image", "entrypoint", "words"),
    [
        ("hostile-fs", "nevis_img_probe:make", "fix (train)"),  # its train raises
        ("plain", "absent_module:make", "has no module 'absent_module'"),  # before any call
        ("absent", "nevis_img_probe:make", "The image cannot be used"),
    ],
)
def test_check_image_fails_a_broken_image_naming_why(images, image, entrypoint, words):
    ref = images.get(image, "localhost/nevis-test-image-absent:1")
    checked = CliRunner().invoke(app, ["check", "--image", ref, "--entrypoint", entrypoint, "--steps", "2"])
    assert checked.exit_code == 1, checked.output
    assert words in " ".join(checked.output.split()), checked.output
    assert "Every protocol call works" not in checked.output


def test_check_takes_a_folder_or_an_image_and_never_an_option_as_image(tmp_path: Path):
    runner = CliRunner()
    neither = runner.invoke(app, ["check", "--entrypoint", "m:f"])
    assert neither.exit_code == 2 and "one of them" in neither.output
    both = runner.invoke(app, ["check", str(tmp_path), "--image", "localhost/x:1", "--entrypoint", "m:f"])
    assert both.exit_code == 2 and "one of them" in both.output
    option = runner.invoke(app, ["check", "--image=--root=/tmp", "--entrypoint", "m:f"])
    assert option.exit_code != 0 and "--image" in str(option.exception or option.output)
