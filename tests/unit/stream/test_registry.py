"""The built-in streams and the registry that loads them (and users' manifest files)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from services.core.errors import ManifestError, UnknownNameError
from workers.stream.manifest import manifest_to_dict, parse_manifest
from workers.stream.manifest_files import list_streams, load_stream, manifest_sha256

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared"
NEVIS_CSV = SHARED / "streams" / "nevis22_dm_nevis.csv"
OFFLINE_DIR = SHARED / "datasets"
BUILT_IN = ["mini", "nevis22-full", "nevis22-full-reference", "nevis22-short", "nevis22-short-reference", "offline"]


def user_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": 1,
        "name": "user-stream",
        "version": "0.1",
        "description": "A user's stream.",
        "source": "tests",
        "meta_test_from_year": 2010,
        "tasks": [
            {
                "order": 1,
                "year": 2001,
                "dataset": "offline:coil100",
                "title": "COIL-100",
                "kind": "single",
                "split": {"kind": "provided"},
            }
        ],
    }
    doc.update(changes)
    return doc


@pytest.fixture(scope="module")
def full():
    return load_stream("nevis22-full")


@pytest.fixture(scope="module")
def short():
    return load_stream("nevis22-short")


def test_list_streams_names_the_built_in_streams() -> None:
    assert set(BUILT_IN) <= set(list_streams())
    assert list_streams() == sorted(list_streams())


@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_stream_round_trips_and_names_itself(name: str) -> None:
    manifest = load_stream(name)

    assert manifest.name == name
    assert parse_manifest(manifest_to_dict(manifest), origin=name) == manifest
    assert len(manifest.tasks) == len(manifest.meta_train) + len(manifest.meta_test)


def test_full_stream_has_106_tasks_79_meta_train_27_meta_test(full) -> None:
    assert (len(full.tasks), len(full.meta_train), len(full.meta_test)) == (106, 79, 27)
    assert full.meta_test_from_year == 2019
    assert max(t.year for t in full.meta_train) < 2019 <= min(t.year for t in full.meta_test)
    assert (full.tasks[0].year, full.tasks[-1].year) == (1992, 2021)


def test_full_stream_marks_the_multi_label_tasks(full) -> None:
    multi = {t.order: t.dataset for t in full.tasks if t.kind == "multi"}

    assert multi == {
        22: "nevis:voc_2007",
        41: "nevis:iaprtc12",
        44: "nevis:voc_2012",
        62: "nevis:voc_actions",
        65: "nevis:celeb_a",
        67: "nevis:sun_attributes",
        88: "nevis:awa2",
        95: "nevis:biwi",
        101: "nevis:nih_chest_xray",
    }


def test_full_stream_keeps_repeated_datasets_as_separate_tasks(full) -> None:
    mnist = [t for t in full.tasks if t.dataset == "nevis:mnist"]

    assert [(t.order, t.year) for t in mnist] == [(10, 2004), (47, 2015)]
    assert len(full.datasets) == 97  # 9 datasets recur
    assert len({t.key for t in full.tasks}) == 106
    assert all("REPEAT" in t.notes for t in full.tasks if t.order in (24, 34, 47, 56, 89, 91))


def test_full_stream_splits_keep_the_source_text_and_say_how_they_were_mapped(full) -> None:
    assert all(t.split.text for t in full.tasks)
    landsat = full.tasks[2]
    assert landsat.split.kind == "official_test"
    assert dict(landsat.split.fractions) == {"train": 0.7, "dev": 0.15, "dev_test": 0.15}
    coil100 = full.tasks[6]
    assert coil100.split.kind == "by_attribute" and "view angle" in coil100.split.text
    assert coil100.split.attribute == "angle_bin" and not coil100.split.approximate
    assert full.tasks[0].split.fractions == {"train": 0.56, "dev": 0.12, "dev_test": 0.12, "test": 0.2}
    assert not any("split mapping:" in t.notes for t in full.tasks)


def test_no_split_of_full_or_short_is_approximate(full, short) -> None:
    assert [t.order for t in (*full.tasks, *short.tasks) if t.split.approximate] == []
    iaprtc12 = full.tasks[40].split  # the reference draws over its training part only
    assert (iaprtc12.kind, iaprtc12.pool) == ("random", "source_train")


# order in FULL -> (kind, attribute) of the rules that reproduce the reference's custom splits
REFERENCE_RULES = {
    4: ("per_class_counts", ""),
    7: ("by_attribute", "angle_bin"),
    21: ("by_attribute", "pose"),
    22: ("official_val", ""),
    28: ("per_class_counts", ""),
    44: ("official_val", ""),
    45: ("by_attribute", "instance"),
    61: ("random", "image_set"),
    66: ("per_class_counts", ""),
    74: ("held_out", "domain"),
    75: ("held_out", "domain"),
    92: ("by_attribute", "angle_bin"),
    93: ("official_test", ""),
    95: ("by_attribute", "subject"),
    98: ("held_out_parts", "domain"),
    99: ("official_val", ""),
}


@pytest.mark.parametrize("order", sorted(REFERENCE_RULES))
def test_custom_reference_splits_map_to_their_own_rule_kinds(full, order) -> None:
    rule = full.tasks[order - 1].split
    assert (rule.kind, rule.attribute) == REFERENCE_RULES[order]


def test_the_reference_lists_are_in_the_manifest(full) -> None:
    coil, biwi, norb = full.tasks[6].split, full.tasks[94].split, full.tasks[44].split
    assert dict(coil.values) == {
        "train": (70, 71, 0, 1, 2),
        "dev": (16, 17, 18, 19, 20),
        "dev_test": (50, 51, 52, 53, 54),
        "test": "rest",
    }
    assert biwi.values["dev"] == (2, 7) and biwi.values["dev_test"] == (3, 9)
    assert biwi.values["test"] == (1, 4, 8, 10) and len(biwi.values["train"]) == 16
    assert norb.values == {"train": (7, 8, 9), "dev": (4,), "dev_test": (6,), "test": "source_test"}
    voc2012 = full.tasks[43].split
    assert dict(voc2012.test_fractions) == {"dev_test": 0.5, "test": 0.5}
    assert full.tasks[74].split.held_out == ("sketch",)
    assert full.tasks[73].split.held_out == ("caltech",)
    assert dict(full.tasks[27].split.counts) == {"dev": 1, "dev_test": 1, "test": 2}
    assert full.tasks[27].split.pick == "last" and full.tasks[3].split.pick == "random"


def test_full_stream_cites_the_csv_and_the_reference_implementation(full) -> None:
    assert "nevis22_dm_nevis.csv" in full.source
    assert "google-deepmind/dm_nevis" in full.source


def test_short_stream_is_a_sane_subset_of_full(full, short) -> None:
    assert (len(short.tasks), len(short.meta_train), len(short.meta_test)) == (29, 24, 5)
    assert set(short.datasets) <= set(full.datasets)
    assert [t.order for t in short.tasks if t.kind == "multi"] == [10, 15]
    years = [t.year for t in short.tasks]
    assert years == sorted(years)


def test_offline_stream_follows_nevis_years_with_meta_test_from_2018() -> None:
    offline = load_stream("offline")

    assert [t.dataset_name for t in offline.tasks] == [
        "orl_faces",
        "coil20",
        "coil100",
        "mpeg7_shapes",
        "mnist",
        "caltech101",
        "umist_faces",
        "extended_yaleb",
        "cifar10",
        "usps",
        "semeion",
        "fashion_mnist",
    ]
    assert [t.dataset_name for t in offline.meta_test] == ["usps", "semeion", "fashion_mnist"]
    assert all(t.source == "offline" and t.split.kind == "provided" for t in offline.tasks)
    assert all(t.num_classes and t.num_examples for t in offline.tasks)


def test_offline_stream_matches_the_dataset_sidecars() -> None:
    assert OFFLINE_DIR.is_dir(), f"the shared datasets are expected beside the repository, at {OFFLINE_DIR}"
    for task in load_stream("offline").tasks:
        meta = json.loads((OFFLINE_DIR / f"{task.dataset_name}.json").read_text())
        assert (task.year, task.domain, task.num_classes, task.num_examples) == (
            meta["year_introduced"],
            meta["domain"],
            meta["num_classes"],
            meta["num_examples"],
        ), task.dataset


def test_mini_stream_is_digits_then_shapes() -> None:
    mini = load_stream("mini")

    assert mini.image_size == 32
    assert [(t.year, t.dataset, t.kind, t.num_classes) for t in mini.tasks] == [
        (1998, "sklearn:digits", "single", 10),
        (2004, "shapes:shape", "single", 4),
        (2012, "shapes:hue", "single", 6),
        (2019, "shapes:scale", "single", 4),
        (2020, "shapes:multi", "multi", 4),
    ]
    assert [t.phase for t in mini.tasks].count("meta_test") == 2
    assert [t.num_examples for t in mini.tasks] == [1797, 1200, 1200, 1200, 1200]


def _converter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("convert_nevis_csv", REPO / "scripts" / "convert_nevis_csv.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_nevis_manifests_match_a_fresh_conversion() -> None:
    assert NEVIS_CSV.is_file(), f"the shared stream CSV is expected beside the repository, at {NEVIS_CSV}"
    docs = _converter().build_manifests(NEVIS_CSV)

    for name, doc in docs.items():
        assert parse_manifest(doc, origin=name) == load_stream(name)


def test_converter_maps_regular_rules_exactly_and_refuses_unknown_ones() -> None:
    converter = _converter()

    rule, how = converter.split_rule("random 56/12/12/20 train/dev/dev-test/test (seed 3)")
    assert (rule["kind"], rule["seed"], how) == ("random", 3, "")
    rule, how = converter.split_rule("orig train->80/10/10 train/dev/dev-test; test=orig test")
    assert (rule["kind"], rule["fractions"]["train"], how) == ("official_test", 0.8, "")
    with pytest.raises(converter.ConversionError, match="no mapping"):
        converter.split_rule("by the phase of the moon")


def test_converter_checks_the_table_against_the_reference_lists() -> None:
    converter = _converter()

    rule, approximate = converter.split_rule(
        "split by view angle: train 5 bins (500 imgs) dev 500 dev_test 500 test 5700"
    )
    assert (rule["kind"], rule["attribute"], approximate) == ("by_attribute", "angle_bin", "")
    with pytest.raises(converter.ConversionError, match="COIL-100"):
        converter.split_rule("split by view angle: train 6 bins (600 imgs) dev 500 dev_test 500 test 5600")
    with pytest.raises(converter.ConversionError, match="add up"):
        converter.split_rule("9 crops/class 5/1/1/3")
    rule, _ = converter.split_rule("per-class split test 20%, dev/dev-test 15% of rest", "nevis:interact")
    assert (rule["attribute"], rule["train_only"]) == ("image_set", ["illustration"])
    with pytest.raises(converter.ConversionError, match="nevis:interact"):
        converter.split_rule("random 56/12/12/20 train/dev/dev-test/test (seed 0)", "nevis:interact")
    with pytest.raises(converter.ConversionError, match="tail"):
        converter.split_rule("random 56/12/12/20 train/dev/dev-test/test (seed 0) per video")


def test_unknown_name_suggests_the_closest_stream() -> None:
    with pytest.raises(UnknownNameError) as info:
        load_stream("nevis-full")

    message = str(info.value)
    assert "Unknown stream 'nevis-full'" in message
    assert "Did you mean 'nevis22-full'" in message
    assert "mini" in message  # the known names are listed


def test_user_manifest_loads_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(user_doc()))

    by_str = load_stream(str(path))
    by_path = load_stream(path)

    assert by_str == by_path
    assert by_str.name == "user-stream" and by_str.tasks[0].dataset == "offline:coil100"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"format": 1,', "not valid JSON"),
        (b"\xff\xfe not utf-8", "Cannot read"),
        (b'{"format": 1, "format": 1}', "appears twice"),
        (b'{"format": NaN}', "NaN is not valid JSON"),
        (json.dumps(user_doc(version="")).encode(), "'version' field"),
    ],
    ids=["truncated", "not-utf8", "duplicate-key", "nan", "invalid-field"],
)
def test_bad_manifest_file_names_the_file(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(content)

    with pytest.raises(ManifestError) as info:
        load_stream(path)

    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_missing_manifest_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist"):
        load_stream(str(tmp_path / "absent.json"))


def test_sha256_depends_on_content_not_layout(tmp_path: Path) -> None:
    compact, pretty = tmp_path / "a.json", tmp_path / "b.json"
    compact.write_text(json.dumps(user_doc()))
    pretty.write_text(json.dumps(user_doc(), indent=4, sort_keys=True))
    changed = tmp_path / "c.json"
    changed.write_text(json.dumps(user_doc(version="0.2")))

    digest = manifest_sha256(load_stream(compact))

    assert len(digest) == 64 and int(digest, 16) >= 0
    assert manifest_sha256(load_stream(pretty)) == digest
    assert manifest_sha256(load_stream(changed)) != digest
