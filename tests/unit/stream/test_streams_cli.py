"""``nevis streams list`` and ``nevis streams show``, through the real Typer app.

CliRunner invokes ``app`` directly, so a NevisError surfaces as ``result.exception`` (exit
code 1); the console script's ``main()`` turns it into one line on stderr and exit code 2,
which the last test checks on the installed ``nevis`` command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import ManifestError, UnknownNameError

runner = CliRunner()
WIDE = {"COLUMNS": "200"}  # rich would otherwise truncate table cells


def test_streams_list_shows_each_stream_with_phase_counts() -> None:
    result = runner.invoke(app, ["streams", "list"], env=WIDE)

    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.stdout.splitlines() if "nevis22-full" in ln)
    cells = [cell.strip() for cell in line.split("│")]
    assert cells[1:6] == ["nevis22-full", "1.1", "106", "79", "27"]
    for name in ("mini", "nevis22-short", "offline"):
        assert name in result.stdout


def test_streams_list_json_parses() -> None:
    result = runner.invoke(app, ["streams", "list", "--json"])

    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert (rows["offline"]["meta_train"], rows["offline"]["meta_test"]) == (9, 3)


def test_show_json_prints_only_json_with_manifest_and_summary() -> None:
    result = runner.invoke(app, ["streams", "show", "nevis22-full", "--json"])

    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # nothing but JSON on stdout
    assert len(doc["manifest"]["tasks"]) == 106
    assert doc["summary"]["per_phase"] == {"meta_train": 79, "meta_test": 27}
    multi = [t["order"] for t in doc["summary"]["multi_label_tasks"]]
    assert multi == [t["order"] for t in doc["manifest"]["tasks"] if t["kind"] == "multi"]
    assert len(multi) == 9
    assert len(doc["sha256"]) == 64


def test_show_prints_a_table_and_totals() -> None:
    result = runner.invoke(app, ["streams", "show", "mini"], env=WIDE)

    assert result.exit_code == 0, result.output
    row = next(ln for ln in result.stdout.splitlines() if "shapes:multi" in ln).split()
    assert row == [
        "5",
        "2020",
        "meta-test",
        "shapes:multi",
        "shape",
        "multi",
        "4",
        "1200",
        "random",
        "60/10/10/20",
        "s0",
    ]
    assert "Totals: 5 tasks, 3 meta-train, 2 meta-test (from 2019); 1 multi-label" in result.stdout


def test_show_accepts_a_manifest_path(tmp_path: Path) -> None:
    mini = runner.invoke(app, ["streams", "show", "mini", "--json"])
    manifest = json.loads(mini.stdout)["manifest"]
    manifest["name"] = "my-copy"
    path = tmp_path / "my-copy.json"
    path.write_text(json.dumps(manifest))

    result = runner.invoke(app, ["streams", "show", str(path), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["manifest"]["name"] == "my-copy"


def test_show_unknown_name_fails_with_did_you_mean() -> None:
    result = runner.invoke(app, ["streams", "show", "nevis22-ful"])

    assert result.exit_code != 0
    assert isinstance(result.exception, UnknownNameError)
    assert "Did you mean 'nevis22-full'" in str(result.exception)
    assert result.stdout == ""


def test_show_malformed_file_fails_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": 1, "name": "bad"}))

    result = runner.invoke(app, ["streams", "show", str(path)])

    assert isinstance(result.exception, ManifestError)
    assert str(path) in str(result.exception) and "'version' field" in str(result.exception)


def test_console_script_reports_unknown_stream_on_stderr_with_exit_code_2() -> None:
    nevis = Path(sys.executable).with_name("nevis")
    assert nevis.exists(), f"the nevis console script should be installed beside {sys.executable}"

    proc = subprocess.run([str(nevis), "streams", "show", "nevis-full"], capture_output=True, text=True, timeout=120)

    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Unknown stream 'nevis-full'" in proc.stderr
    assert "nevis22-full" in proc.stderr
    assert "Traceback" not in proc.stderr
