"""A learner image mounted by the node (the kuberay backend's image volume, ``NEVIS_IMAGE_ROOT``):
a host is given the image's folders only where no link of the image leads out of it, since
bind-mounting a path follows its links (the mount shows the image's links as they are).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from workers.sandbox.images.mounted import IMAGE_ROOT_VAR, usable_import_path
from workers.sandbox.launch import host_launch

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def mounted(tmp_path: Path, monkeypatch) -> Path:
    """An image root: a real /opt/learner, a site-packages that is a link to the node's
    secrets, and /usr/lib/python3/dist-packages below a linked /usr/lib."""
    root, secret = tmp_path / "image", tmp_path / "node-secrets"
    (root / "opt" / "learner").mkdir(parents=True)
    (root / "opt" / "learner" / "mod.py").write_text("x = 1\n")
    secret.mkdir()
    (secret / "token").write_text("s3cret")
    site = root / "usr" / "local" / "lib" / PY
    site.mkdir(parents=True)
    (site / "site-packages").symlink_to(secret)  # absolute: out of the image
    (root / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "elsewhere" / "python3" / "dist-packages").mkdir(parents=True)
    (root / "usr" / "lib" / "python3").symlink_to(tmp_path / "elsewhere" / "python3")
    monkeypatch.setenv(IMAGE_ROOT_VAR, str(root))
    return root


def test_a_host_gets_the_image_s_real_folders_and_no_linked_one(mounted: Path, tmp_path: Path):
    learner = mounted / "opt" / "learner"
    linked = mounted / "usr" / "local" / "lib" / PY / "site-packages"
    deeper = mounted / "usr" / "lib" / "python3" / "dist-packages"
    assert linked.is_dir() and deeper.is_dir()  # both look like folders to a plain check
    bundle = tmp_path / "bundle"  # outside the image: not this module's concern
    bundle.mkdir()
    launch = host_launch(sandbox="none", import_paths=[str(learner), str(linked), str(deeper), str(bundle)])
    given = launch.env["LEARNER_IMPORT_PATH"].split(os.pathsep)
    assert given == [str(learner.resolve()), str(bundle.resolve())]


def test_without_a_mounted_image_nothing_changes(tmp_path: Path):
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert usable_import_path(str(tmp_path / "link"), env={})
    assert usable_import_path(str(tmp_path / "link"), env={IMAGE_ROOT_VAR: str(tmp_path / "other")})
    assert not usable_import_path(str(tmp_path / "link"), env={IMAGE_ROOT_VAR: str(tmp_path)})
    assert usable_import_path(str(target), env={IMAGE_ROOT_VAR: str(tmp_path)})
