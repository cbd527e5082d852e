"""The split rule's JSON form: the reference kinds parse, round-trip and are checked field
by field; the older kinds keep their exact form (so manifest hashes and prepared indexes
stay valid)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import ManifestError
from workers.stream.manifest import SplitRule, manifest_to_dict, parse_manifest
from workers.stream.split_rule import split_rule_key, split_rule_to_dict

RULES: dict[str, dict[str, Any]] = {
    "by_attribute": {
        "kind": "by_attribute",
        "attribute": "angle_bin",
        "values": {"train": [70, 71, 0], "dev": [16], "dev_test": [50], "test": "rest"},
    },
    "source_test": {
        "kind": "by_attribute",
        "attribute": "instance",
        "values": {"train": [7, 8, 9], "dev": [4], "dev_test": [6], "test": "source_test"},
    },
    "strings": {
        "kind": "by_attribute",
        "attribute": "pose",
        "values": {"train": ["P00"], "dev": ["P05"], "dev_test": ["P01"], "test": ["P06", "P08"]},
    },
    "held_out": {
        "kind": "held_out",
        "attribute": "domain",
        "held_out": ["sketch"],
        "fractions": {"train": 0.8, "dev": 0.2},
        "test_fractions": {"dev_test": 0.5, "test": 0.5},
    },
    "held_out_parts": {"kind": "held_out_parts", "attribute": "domain", "held_out": ["sketch"]},
    "official_val": {"kind": "official_val", "fractions": {"train": 0.8, "dev": 0.2}},
    "val_as_test": {
        "kind": "official_val",
        "fractions": {"train": 0.8, "dev": 0.2},
        "test_fractions": {"dev_test": 0.5, "test": 0.5},
    },
    "per_class_counts": {"kind": "per_class_counts", "pick": "last", "counts": {"dev": 1, "dev_test": 1, "test": 2}},
    "approximate": {
        "kind": "random",
        "approximate": "why not exact",
        "fractions": {"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2},
    },
    "train_only": {
        "kind": "random",
        "attribute": "image_set",
        "train_only": ["illustration"],
        "fractions": {"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2},
    },
    "source_train_pool": {
        "kind": "random",
        "pool": "source_train",
        "fractions": {"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2},
    },
}


def _doc(split: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": 1,
        "name": "s",
        "version": "1",
        "description": "d",
        "source": "t",
        "meta_test_from_year": 2019,
        "tasks": [{"order": 1, "year": 2000, "dataset": "offline:x", "title": "X", "kind": "single", "split": split}],
    }


@pytest.mark.parametrize("case", list(RULES), ids=list(RULES))
def test_reference_rule_kinds_parse_and_round_trip(case):
    manifest = parse_manifest(_doc(RULES[case]), origin="m.json")
    assert parse_manifest(manifest_to_dict(manifest), origin="again") == manifest
    rule = manifest.tasks[0].split
    assert rule.kind == RULES[case]["kind"]
    assert split_rule_to_dict(rule)["kind"] == rule.kind


def test_the_general_kinds_keep_their_document_form_and_key():
    rule = SplitRule(
        kind="random", fractions={"train": 0.5, "dev": 0.1, "dev_test": 0.1, "test": 0.3}, seed=2, text="t"
    )
    assert list(split_rule_to_dict(rule)) == ["kind", "fractions", "seed", "text"]
    assert split_rule_key(rule) == {"kind": "random", "fractions": dict(rule.fractions), "seed": 2}
    assert split_rule_key(SplitRule(kind="provided")) == {"kind": "provided", "fractions": {}, "seed": 0}
    assert list(split_rule_to_dict(SplitRule(kind="provided"))) == ["kind", "seed", "text"]


def test_a_provided_rule_with_empty_fractions_still_parses():
    rule = parse_manifest(_doc({"kind": "provided", "fractions": {}}), origin="m").tasks[0].split
    assert rule == SplitRule(kind="provided")


def _with(case: str, **changes: Any) -> dict[str, Any]:
    rule = {**RULES[case], **changes}
    return {k: v for k, v in rule.items() if v is not None}


MALFORMED = {
    "attribute missing": (_with("by_attribute", attribute=None), "split.attribute"),
    "values lack a split": (_with("by_attribute", values={"train": [1], "dev": [2], "test": "rest"}), "split.values"),
    "value in two splits": (
        _with("by_attribute", values={"train": [1], "dev": [1], "dev_test": [2], "test": [3]}),
        "split.values.dev",
    ),
    "two rests": (
        _with("by_attribute", values={"train": "rest", "dev": [1], "dev_test": [2], "test": "rest"}),
        "split.values",
    ),
    "source_test outside test": (
        _with("by_attribute", values={"train": "source_test", "dev": [1], "dev_test": [2], "test": [3]}),
        "split.values.train",
    ),
    "mixed value types": (
        _with("by_attribute", values={"train": [1, "a"], "dev": [2], "dev_test": [3], "test": "rest"}),
        "split.values.train",
    ),
    "fractions on by_attribute": (_with("by_attribute", fractions={"train": 1.0}), "split.fractions"),
    "held_out empty": (_with("held_out", held_out=[]), "split.held_out"),
    "test_fractions missing": (_with("held_out", test_fractions=None), "split.test_fractions"),
    "test_fractions sum": (_with("held_out", test_fractions={"dev_test": 0.5, "test": 0.6}), "split.test_fractions"),
    "official_val with dev_test": (
        _with("official_val", fractions={"train": 0.7, "dev": 0.15, "dev_test": 0.15}),
        "split.fractions",
    ),
    "counts lack test": (_with("per_class_counts", counts={"dev": 1, "dev_test": 1}), "split.counts"),
    "counts all zero": (_with("per_class_counts", counts={"dev": 0, "dev_test": 0, "test": 0}), "split.counts"),
    "pick unknown": (_with("per_class_counts", pick="first"), "split.pick"),
    "approximate not text": (_with("approximate", approximate=3), "split.approximate"),
    "pool unknown": (_with("source_train_pool", pool="everything"), "split.pool"),
    "train_only without attribute": (_with("train_only", attribute=None), "split.attribute"),
    "attribute without train_only": (_with("train_only", train_only=None), "split.train_only"),
    "pool on official_test": (
        {"kind": "official_test", "pool": "source_train", "fractions": {"train": 0.7, "dev": 0.15, "dev_test": 0.15}},
        "split.pool",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_reference_rule_names_its_field(case):
    split, field = MALFORMED[case]
    with pytest.raises(ManifestError, match=f"task 1: the '{field}' field") as caught:
        parse_manifest(_doc(split), origin="m.json")
    assert "m.json" in str(caught.value)


def test_streams_show_marks_tasks_whose_split_is_approximate(tmp_path):
    doc = _doc(RULES["approximate"])
    doc["tasks"].append(
        {
            "order": 2,
            "year": 2001,
            "dataset": "offline:y",
            "title": "Y",
            "kind": "single",
            "split": RULES["by_attribute"],
        }
    )
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    runner = CliRunner()
    result = runner.invoke(app, ["streams", "show", str(path)], env={"COLUMNS": "220"})

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "~ random 56/12/12/20 s0" in next(ln for ln in lines if "offline:x" in ln)
    assert "~" not in next(ln for ln in lines if "offline:y" in ln and "by angle_bin" in ln)
    assert "~ task 1 (offline:x): split approximates the source's rule: why not exact" in lines

    as_json = runner.invoke(app, ["streams", "show", str(path), "--json"])
    assert json.loads(as_json.stdout)["summary"]["approximate_splits"] == [
        {"order": 1, "dataset": "offline:x", "why": "why not exact"}
    ]


@pytest.mark.parametrize("name", ["nevis22-full", "nevis22-short"])
def test_streams_show_marks_no_task_of_the_nevis_streams(name):
    runner = CliRunner()
    result = runner.invoke(app, ["streams", "show", name], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "~" not in result.stdout
    as_json = runner.invoke(app, ["streams", "show", name, "--json"])
    assert json.loads(as_json.stdout)["summary"]["approximate_splits"] == []
