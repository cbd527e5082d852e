"""Where a probe worker's learner hosts find learner code: NEVIS_LEARNER_PATHS, never the
worker's own import path in production (a sitecustomize.py there would run next to the
database credentials)."""

from __future__ import annotations

import os

import pytest

from services.cli.probe_cmd import learner_paths
from services.core.errors import ConfigError


def test_the_setting_names_the_folders():
    assert learner_paths(os.pathsep.join(["/opt/a", "", "/opt/b"]), {}) == ("/opt/a", "/opt/b")


def test_local_use_falls_back_to_pythonpath():
    assert learner_paths("", {"PYTHONPATH": "/home/me/learner"}) == ("/home/me/learner",)


def test_a_production_probe_worker_refuses_a_pythonpath_naming_the_setting():
    with pytest.raises(ConfigError, match="NEVIS_LEARNER_PATHS"):
        learner_paths("/opt/learner", {"PYTHONPATH": "/opt/learner", "NEVIS_ENVIRONMENT": "production"})
    assert learner_paths("/opt/learner", {"NEVIS_ENVIRONMENT": "production"}) == ("/opt/learner",)
