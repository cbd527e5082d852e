"""``--ruleset`` on ``nevis run``, ``nevis submit`` and ``nevis leaderboard`` (issue 50): an
unknown ruleset is a usage error naming the option and the closest name, before anything runs
or is sent."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from services.cli.main import app


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--stream", "mini"],
        ["submit", ".", "--entrypoint", "my_learner:make", "--stream", "mini"],
        ["leaderboard", "--stream", "mini"],
    ],
)
def test_an_unknown_ruleset_is_refused_before_anything_runs(command, monkeypatch, tmp_path):
    monkeypatch.setenv("NEVIS_URL", "http://127.0.0.1:9")  # nothing listens: nothing may be sent
    monkeypatch.setenv("NEVIS_DATA_DIR", str(tmp_path))  # nothing may be written where it matters
    result = CliRunner().invoke(app, [*command, "--ruleset", "budgte-1e12"])
    assert result.exit_code == 2, result.output
    assert "--ruleset" in result.output and "budget" in result.output
    assert not list(tmp_path.iterdir())  # no database made, no run started
