"""Shuffled stream variants (``nevis streams derive``): what a shuffle keeps, what it changes.

Built on the shipped ``nevis22-short`` (29 tasks, up to 8 per year) and ``nevis22-full``
(106 tasks) manifests: a manifest is only JSON, so no data is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import ConfigError, ManifestError, UnknownNameError
from workers.stream.derive import SHUFFLE_MODES, derive_manifest
from workers.stream.manifest import StreamManifest, TaskSpec, manifest_to_dict, parse_manifest
from workers.stream.manifest_files import load_stream, manifest_sha256

runner = CliRunner()


def _identity(task: TaskSpec) -> tuple[object, ...]:
    """A task without its position: what a shuffle moves around."""
    return (task.year, task.dataset, task.title, task.kind, repr(task.split), task.notes)


def _sequence(manifest: StreamManifest) -> list[tuple[object, ...]]:
    return [_identity(t) for t in manifest.tasks]


@pytest.fixture(scope="module")
def short() -> StreamManifest:
    return load_stream("nevis22-short")


@pytest.mark.parametrize("name", ["nevis22-short", "nevis22-full"])
def test_within_years_keeps_every_year_its_tasks_and_the_phases(name: str) -> None:
    parent = load_stream(name)

    derived = derive_manifest(parent, mode="within-years", seed=3)

    assert [t.year for t in derived.tasks] == [t.year for t in parent.tasks]
    for year in {t.year for t in parent.tasks}:
        before, after = (Counter(_identity(t) for t in m.tasks if t.year == year) for m in (parent, derived))
        assert before == after, year
    assert [t.phase for t in derived.tasks] == [t.phase for t in parent.tasks]
    assert Counter(map(_identity, derived.meta_test)) == Counter(map(_identity, parent.meta_test))
    assert _sequence(derived) != _sequence(parent)


def test_all_keeps_the_meta_test_set_and_puts_it_last_but_changes_the_order(short: StreamManifest) -> None:
    derived = derive_manifest(short, mode="all", seed=3)

    assert Counter(map(_identity, derived.meta_test)) == Counter(map(_identity, short.meta_test))
    assert Counter(map(_identity, derived.meta_train)) == Counter(map(_identity, short.meta_train))
    n_train = len(short.meta_train)
    assert {t.phase for t in derived.tasks[:n_train]} == {"meta_train"}
    assert {t.phase for t in derived.tasks[n_train:]} == {"meta_test"}
    assert _sequence(derived) != _sequence(short)
    years = [t.year for t in derived.tasks]
    assert years != sorted(years)  # crosses year boundaries, unlike within-years


@pytest.mark.parametrize("mode", SHUFFLE_MODES)
def test_orders_are_renumbered_and_tasks_keep_their_own_year_and_phase(short: StreamManifest, mode: str) -> None:
    derived = derive_manifest(short, mode=mode, seed=11)

    assert [t.order for t in derived.tasks] == list(range(1, len(short.tasks) + 1))
    assert Counter(map(_identity, derived.tasks)) == Counter(map(_identity, short.tasks))
    for task in derived.tasks:
        expected = "meta_test" if task.year >= short.meta_test_from_year else "meta_train"
        assert task.phase == expected


@pytest.mark.parametrize("mode", SHUFFLE_MODES)
def test_same_seed_same_bytes_other_seed_other_order(short: StreamManifest, mode: str) -> None:
    def text(seed: int) -> str:
        return json.dumps(manifest_to_dict(derive_manifest(short, mode=mode, seed=seed)), indent=2)

    assert text(5) == text(5)
    first = derive_manifest(short, mode=mode, seed=5)
    second = derive_manifest(short, mode=mode, seed=6)
    assert _sequence(first) != _sequence(second)
    assert (first.name, first.version) != (second.name, second.version)


def test_name_version_and_provenance_say_where_it_came_from(short: StreamManifest) -> None:
    derived = derive_manifest(short, mode="all", seed=7)

    assert derived.name == "nevis22-short-shuffled-all-s7"
    assert derived.version == "1.1+all.s7"
    provenance = derived.derived_from
    assert provenance is not None
    assert (provenance.name, provenance.version, provenance.mode, provenance.seed) == ("nevis22-short", "1.1", "all", 7)
    assert provenance.sha256 == manifest_sha256(short)
    assert manifest_sha256(derived) != manifest_sha256(short)
    assert short.derived_from is None
    assert "derived_from" not in manifest_to_dict(short)  # shipped hashes are unchanged


@pytest.mark.parametrize("mode", SHUFFLE_MODES)
def test_written_file_loads_back_through_load_stream(short: StreamManifest, mode: str, tmp_path: Path) -> None:
    derived = derive_manifest(short, mode=mode, seed=2)
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(manifest_to_dict(derived), indent=2), encoding="utf-8")

    assert load_stream(str(path)) == derived
    assert load_stream(path).meta_test_from_year == short.meta_test_from_year


def test_a_derived_stream_can_be_derived_again(short: StreamManifest) -> None:
    once = derive_manifest(short, mode="all", seed=1)

    twice = derive_manifest(once, mode="within-years", seed=1)

    assert twice.derived_from is not None and twice.derived_from.name == once.name
    assert [t.year for t in twice.tasks] == [t.year for t in once.tasks]
    assert parse_manifest(manifest_to_dict(twice)) == twice


def test_unknown_mode_and_bad_seed_are_named(short: StreamManifest) -> None:
    with pytest.raises(UnknownNameError, match=r"shuffle mode 'years'.*within-years"):
        derive_manifest(short, mode="years", seed=0)
    with pytest.raises(ConfigError, match=r"seed must be an int in \[0, 4294967295\]\. Got -1"):
        derive_manifest(short, mode="all", seed=-1)


def _derived_doc(short: StreamManifest) -> dict:
    return manifest_to_dict(derive_manifest(short, mode="all", seed=3))


@pytest.mark.parametrize(
    ("field", "value"), [("mode", "sideways"), ("seed", -4), ("sha256", "abc"), ("name", "Not A Slug")]
)
def test_malformed_provenance_is_a_manifest_error_naming_the_field(
    short: StreamManifest, field: str, value: object
) -> None:
    doc = _derived_doc(short)
    doc["derived_from"][field] = value

    with pytest.raises(ManifestError, match=rf"'derived_from\.{field}' field"):
        parse_manifest(doc, origin="variant.json")


def test_provenance_with_a_missing_or_extra_field_is_refused(short: StreamManifest) -> None:
    missing = _derived_doc(short)
    del missing["derived_from"]["seed"]
    extra = _derived_doc(short)
    extra["derived_from"]["colour"] = "red"

    with pytest.raises(ManifestError, match=r"'derived_from\.seed' field is required"):
        parse_manifest(missing, origin="variant.json")
    with pytest.raises(ManifestError, match=r"'derived_from\.colour' field is not part"):
        parse_manifest(extra, origin="variant.json")


def test_years_may_go_back_only_in_a_derived_manifest_and_never_across_phases(short: StreamManifest) -> None:
    hand_written = _derived_doc(short)
    del hand_written["derived_from"]
    with pytest.raises(ManifestError, match=r"'year' field must not be before"):
        parse_manifest(hand_written, origin="variant.json")

    doc = _derived_doc(short)
    first_test = next(i for i, t in enumerate(doc["tasks"]) if t["phase"] == "meta_test")
    tasks = doc["tasks"]
    tasks[first_test - 1], tasks[first_test] = tasks[first_test], tasks[first_test - 1]
    for order, task in enumerate(tasks, 1):
        task["order"] = order
    cannot_follow = rf"task {first_test + 1}: .*meta-train task cannot follow"
    with pytest.raises(ManifestError, match=cannot_follow):
        parse_manifest(doc, origin="variant.json")


def test_cli_writes_a_manifest_that_loads_and_matches_the_function(tmp_path: Path) -> None:
    out = tmp_path / "short-all.json"
    args = ["streams", "derive", "nevis22-short", "--shuffle", "all", "--seed", "4", "--out", str(out)]

    result = runner.invoke(app, args)

    assert result.exit_code == 0, result.output
    assert "nevis22-short-shuffled-all-s4" in result.stdout
    expected = derive_manifest(load_stream("nevis22-short"), mode="all", seed=4)
    assert load_stream(str(out)) == expected
    show = runner.invoke(app, ["streams", "show", str(out), "--json"])
    assert json.loads(show.stdout)["summary"]["per_phase"] == {"meta_train": 24, "meta_test": 5}


def test_cli_refuses_an_existing_file_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "variant.json"
    out.write_text("keep me", encoding="utf-8")
    args = ["streams", "derive", "nevis22-short", "--shuffle", "within-years", "--seed", "1", "--out", str(out)]

    refused = runner.invoke(app, args)

    assert refused.exit_code != 0
    assert isinstance(refused.exception, ConfigError)
    assert "already exists" in str(refused.exception) and "--force" in str(refused.exception)
    assert out.read_text(encoding="utf-8") == "keep me"

    forced = runner.invoke(app, [*args, "--force"])

    assert forced.exit_code == 0, forced.output
    assert load_stream(out).name == "nevis22-short-shuffled-within-years-s1"


def test_cli_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        args = ["streams", "derive", "nevis22-full", "--shuffle", "all", "--seed", "9", "--out", str(path)]
        assert runner.invoke(app, args).exit_code == 0

    assert paths[0].read_bytes() == paths[1].read_bytes()


@pytest.mark.parametrize(
    ("args", "error", "named"),
    [
        (["nevis22-short", "--shuffle", "sideways", "--seed", "0"], UnknownNameError, "'sideways'"),
        (["nevis22-short", "--shuffle", "all", "--seed", "-1"], ConfigError, "Got -1"),
        (["nevis22-shrt", "--shuffle", "all", "--seed", "0"], UnknownNameError, "'nevis22-short'"),
    ],
    ids=["unknown mode", "negative seed", "unknown stream"],
)
def test_cli_bad_input_exits_non_zero_naming_the_problem(
    tmp_path: Path, args: list[str], error: type[Exception], named: str
) -> None:
    out = tmp_path / "variant.json"

    result = runner.invoke(app, ["streams", "derive", *args, "--out", str(out)])

    assert result.exit_code != 0
    assert isinstance(result.exception, error)
    assert named in str(result.exception)
    assert not out.exists()


def test_cli_refuses_an_out_path_that_is_not_json(tmp_path: Path) -> None:
    out = tmp_path / "variant.txt"

    result = runner.invoke(app, ["streams", "derive", "mini", "--shuffle", "all", "--seed", "0", "--out", str(out)])

    assert isinstance(result.exception, ConfigError)
    assert ".json" in str(result.exception)
    assert not out.exists()


def test_console_script_prints_one_error_line_for_an_unknown_mode(tmp_path: Path) -> None:
    nevis = Path(sys.executable).with_name("nevis")
    out = tmp_path / "variant.json"

    proc = subprocess.run(
        [str(nevis), "streams", "derive", "mini", "--shuffle", "bogus", "--seed", "0", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert proc.returncode == 2
    assert "Unknown shuffle mode 'bogus'" in proc.stderr
    assert "within-years" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
