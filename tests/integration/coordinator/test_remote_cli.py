"""The ``nevis`` client against a real served API (issue 25, item 1): login, submit a learner
folder, status, leaderboard, cancel, and the server's problems shown as title and detail.

The server is the module's ``live_server`` (a real uvicorn, no scheduler), so a submission stays
queued; its run is then committed as the runner commits one (the ``measured_run`` fixture) to
read a finished submission and a leaderboard row back. A full run through the scheduler and Ray
is what test_local_e2e.py covers; here the client is the subject. SQLite only: the client is
the subject, not the database dialect (the API's routes are tested on both).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.client import NevisClient
from services.cli.console import make_console
from services.cli.learner_template import render
from services.cli.main import app
from services.cli.remote_follow import follow
from services.coordinator.common.client_errors import InvalidInputError
from services.store.db import make_engine, session_factory, transaction

pytestmark = pytest.mark.parametrize("module_database_url", ["sqlite"], indirect=True, scope="module")


@pytest.fixture
def learner_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "linear"
    folder.mkdir()
    for name, text in render("my_learner", "linear").items():
        (folder / name).write_text(text)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "my_learner.cpython-311.pyc").write_bytes(b"junk")
    return folder


def _nevis(kit, env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(kit.nevis), *args], input=stdin, capture_output=True, text=True, env=env, timeout=300)


def test_login_submit_status_leaderboard_cancel(
    live_server: int, shared_api, kit, learner_folder: Path, tmp_path: Path, monkeypatch, measured_run
) -> None:
    url = f"http://127.0.0.1:{live_server}"
    config = tmp_path / "config"
    for name in ("NEVIS_URL", "NEVIS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "COLUMNS": "200"}
    runner = CliRunner(env={"XDG_CONFIG_HOME": str(config), "COLUMNS": "200"})

    refused = _nevis(kit, env, "login", url, stdin="not-a-token\n")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "error: Unauthorized (401): " in refused.stderr, refused.stderr
    assert not (config / "nevis" / "credentials.json").exists()

    logged = _nevis(kit, env, "login", url, stdin=shared_api.tokens.alice + "\n")
    assert logged.returncode == 0, logged.stderr
    assert "as alice (submitter)" in logged.stdout
    assert stat.S_IMODE((config / "nevis" / "credentials.json").stat().st_mode) == 0o600

    args = [
        "submit",
        str(learner_folder),
        "--entrypoint",
        "my_learner:make",
        "--stream",
        "tiny2",
        "--trials",
        "1",
        "--steps",
        "2",
        "--no-check",
        "--detach",
    ]
    refused_url = runner.invoke(app, [*args, "--code-url", "http://github.com/alice/linear"])
    assert isinstance(refused_url.exception, InvalidInputError) and "--code-url" in str(refused_url.exception)
    first = runner.invoke(app, [*args, "--code-url", "https://github.com/alice/linear"])
    assert first.exit_code == 0, first.output
    assert "Registered learner" in first.output
    sub_id = int(re.search(r"Submission (\d+): linear-\w+ on tiny2 test-1 \(meta_test\), queued", first.output)[1])
    second = runner.invoke(app, [*args, "--private"])
    assert second.exit_code == 0 and "Re-using learner" in second.output, second.output
    other_id = int(re.search(r"Submission (\d+):", second.output)[1])

    with NevisClient(url, shared_api.tokens.alice) as client:
        learner = client.submission(sub_id)["learner"]
        assert client.submission(other_id)["learner"] == learner  # one learner, registered once
        assert (client.submission(sub_id)["code_url"], client.submission(other_id)["code_url"]) == (
            "https://github.com/alice/linear",
            None,
        )
        assert sum(lr.name == learner["name"] for lr in client.learners()) == 1

    queued = runner.invoke(app, ["status", str(sub_id)])
    assert queued.exit_code == 0 and "status: queued" in queued.output, queued.output
    listed = runner.invoke(app, ["status"])
    assert listed.exit_code == 0 and str(sub_id) in listed.output and "queued" in listed.output

    engine = make_engine(shared_api.settings.database_url)
    try:
        with transaction(session_factory(engine)) as session:
            measured_run(session, cpu={}, submission_id=sub_id, error=0.25)
    finally:
        engine.dispose()
    done = runner.invoke(app, ["status", str(sub_id)])
    assert "status: succeeded" in done.output and "E (meta_test, 1/1 tasks) = 0.2500" in done.output, done.output
    with NevisClient(url, shared_api.tokens.alice) as client:
        final = follow(client, sub_id, console=make_console(), poll_s=0.1)  # ends at once: finished
    assert final["status"] == "succeeded"

    board = runner.invoke(app, ["leaderboard", "--stream", "tiny2"])
    assert board.exit_code == 0, board.output
    row = next(line for line in board.output.splitlines() if f" {sub_id} " in line)
    assert learner["name"][:20] in row and "0.2500" in row and "alice" in row
    assert "not public" not in row and " public " in row
    assert re.search(r"(?<![\d.])1\.000(?![\de])", row)  # its profile score: the one finished run, best on every task
    cells = next(
        line.split("│")
        for line in board.output.splitlines()
        if line.count("│") > 3 and line.split("│")[2].strip() == str(other_id)
    )  # the submission column
    assert "not public" in [c.strip() for c in cells]

    cancelled = runner.invoke(app, ["cancel", str(other_id)])
    assert cancelled.exit_code == 0 and f"Submission {other_id}: cancelled" in cancelled.output

    missing = _nevis(kit, env, "status", "999999")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "error: Not Found (404): " in missing.stderr, missing.stderr


def test_submit_checks_the_learner_first(
    live_server: int, shared_api, learner_folder: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("NEVIS_URL", f"http://127.0.0.1:{live_server}")
    monkeypatch.setenv("NEVIS_TOKEN", shared_api.tokens.bob)
    result = CliRunner().invoke(
        app, ["submit", str(learner_folder), "--entrypoint", "my_learner:nothing", "--stream", "tiny2"]
    )
    assert result.exit_code == 1 and "fix (load)" in result.output and "Nothing was submitted" in result.output
    with NevisClient(f"http://127.0.0.1:{live_server}", shared_api.tokens.bob) as client:
        assert client.submissions()["total"] == 0 and not list(client.learners())


def test_ctrl_c_detaches_and_the_submission_goes_on(
    live_server: int, shared_api, kit, learner_folder: Path, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{live_server}"
    env = {
        **os.environ,
        "NEVIS_URL": url,
        "NEVIS_TOKEN": shared_api.tokens.admin,
        "PYTHONUNBUFFERED": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    proc = subprocess.Popen(
        [
            str(kit.nevis),
            "submit",
            str(learner_folder),
            "--entrypoint",
            "my_learner:make",
            "--stream",
            "tiny2",
            "--phase",
            "meta_train",
            "--no-check",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # a test runner started in the background ignores SIGINT, and its children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    try:
        for line in proc.stdout:  # the server has no scheduler: the run stays queued, followed
            lines.append(line)
            if line.startswith("Submission "):
                break
        sub_id = int(re.search(r"Submission (\d+):", lines[-1])[1])
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, "".join(lines) + rest
    assert f"Detached. Submission {sub_id} goes on" in rest and "Traceback" not in rest
    with NevisClient(url, shared_api.tokens.admin) as client:
        assert client.submission(sub_id)["status"] == "queued"
