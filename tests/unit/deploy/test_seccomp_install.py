"""`nevis sandbox install-profile`: what the chart's DaemonSet runs on every node."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.cli.sandbox_cmd import install_profile_file
from services.core.errors import ConfigError

PROFILE = Path(__file__).resolve().parents[3] / "helm" / "nevis" / "files" / "seccomp" / "learner-v1.json"


def test_the_profile_lands_where_the_kubelet_looks_readable_and_whole(tmp_path):
    target = tmp_path / "seccomp" / "nevis" / "learner-v1.json"
    result = CliRunner().invoke(app, ["sandbox", "install-profile", "--from", str(PROFILE), "--to", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == PROFILE.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["learner-v1.json"]  # no temporary left


def test_a_broken_profile_is_refused_and_the_installed_one_kept(tmp_path):
    target = tmp_path / "learner.json"
    install_profile_file(PROFILE, target)
    for text, needle in [
        ("{", "not JSON"),
        ('{"defaultAction": "ALLOW"}', "defaultAction"),
        (json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": "ptrace"}]}), "syscalls"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=needle):
            install_profile_file(bad, target)
        assert target.read_text() == PROFILE.read_text()
    missing = CliRunner().invoke(
        app, ["sandbox", "install-profile", "--from", str(tmp_path / "none.json"), "--to", str(target)]
    )
    assert isinstance(missing.exception, ConfigError) and "Cannot read the seccomp profile" in str(missing.exception)
