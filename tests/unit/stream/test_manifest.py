"""parse_manifest: a valid document becomes frozen values; every malformed field is named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from services.core.errors import ManifestError
from workers.stream.manifest import StreamManifest, TaskSpec, manifest_to_dict, parse_manifest, phase_of

ORIGIN = "my-stream.json"


def _random_split() -> dict[str, Any]:
    return {
        "kind": "random",
        "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2},
        "seed": 0,
        "text": "random 60/10/10/20",
    }


def valid_doc() -> dict[str, Any]:
    """Three tasks: two meta-train (one repeated later), one meta-test."""
    return {
        "format": 1,
        "name": "my-stream",
        "version": "1.0",
        "description": "A test stream.",
        "source": "Written by hand for the tests.",
        "meta_test_from_year": 2019,
        "image_size": 32,
        "tasks": [
            {
                "order": 1,
                "year": 1998,
                "dataset": "sklearn:digits",
                "title": "Digits",
                "domain": "ocr",
                "kind": "single",
                "num_classes": 10,
                "num_examples": 1797,
                "split": _random_split(),
            },
            {
                "order": 2,
                "year": 2019,
                "dataset": "nevis:mnist",
                "title": "MNIST",
                "kind": "multi",
                "split": {"kind": "official_test", "fractions": {"train": 0.7, "dev": 0.15, "dev_test": 0.15}},
            },
            {
                "order": 3,
                "year": 2019,
                "dataset": "offline:usps",
                "title": "USPS",
                "domain": None,
                "kind": "single",
                "num_classes": 10,
                "split": {"kind": "provided", "seed": 3},
                "phase": "meta_test",
                "notes": "provided lists",
            },
        ],
    }


def test_valid_manifest_parses_into_frozen_values() -> None:
    manifest = parse_manifest(valid_doc(), origin=ORIGIN)

    assert isinstance(manifest, StreamManifest)
    assert [t.order for t in manifest.tasks] == [1, 2, 3]
    assert manifest.image_size == 32
    first = manifest.tasks[0]
    assert first.split.fractions == {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}
    assert first.num_examples == 1797
    assert first.key == "001-sklearn-digits"
    assert (first.source, first.dataset_name) == ("sklearn", "digits")
    assert manifest.tasks[1].num_classes is None and manifest.tasks[1].domain is None
    assert manifest.tasks[2].split.seed == 3 and manifest.tasks[2].split.fractions == {}
    with pytest.raises(AttributeError):
        first.year = 2000  # type: ignore[misc]


def test_phase_follows_year_and_cutoff() -> None:
    manifest = parse_manifest(valid_doc(), origin=ORIGIN)

    assert [t.phase for t in manifest.tasks] == ["meta_train", "meta_test", "meta_test"]
    assert [t.order for t in manifest.meta_train] == [1]
    assert [t.order for t in manifest.meta_test] == [2, 3]
    assert phase_of(2018, 2019) == "meta_train"
    assert phase_of(2019, 2019) == "meta_test"


def test_document_form_round_trips() -> None:
    manifest = parse_manifest(valid_doc(), origin=ORIGIN)
    doc = manifest_to_dict(manifest)

    assert parse_manifest(doc, origin=ORIGIN) == manifest
    assert [t["phase"] for t in doc["tasks"]] == ["meta_train", "meta_test", "meta_test"]
    assert "fractions" not in doc["tasks"][2]["split"]


def test_fractions_come_out_in_split_order_whatever_the_file_order() -> None:
    doc = valid_doc()
    doc["tasks"][0]["split"]["fractions"] = {"test": 0.2, "dev_test": 0.1, "train": 0.6, "dev": 0.1}

    task = parse_manifest(doc, origin=ORIGIN).tasks[0]

    assert list(task.split.fractions) == ["train", "dev", "dev_test", "test"]


def test_rounded_fractions_within_tolerance_are_accepted() -> None:
    doc = valid_doc()
    doc["tasks"][0]["split"]["fractions"] = {"train": 0.0694, "dev": 0.0694, "dev_test": 0.0694, "test": 0.7918}

    assert parse_manifest(doc, origin=ORIGIN).tasks[0].split.fractions["test"] == 0.7918


def test_repeated_dataset_stays_a_separate_task() -> None:
    doc = valid_doc()
    repeat = copy.deepcopy(doc["tasks"][0])
    repeat.update(order=4, year=2020)
    doc["tasks"].append(repeat)

    manifest = parse_manifest(doc, origin=ORIGIN)

    assert len(manifest.tasks) == 4
    assert manifest.datasets == ("sklearn:digits", "nevis:mnist", "offline:usps")
    assert manifest.tasks[0].key != manifest.tasks[3].key


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets a dotted path, e.g. 'tasks.1.split.seed'."""

    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(last) if isinstance(node, list) else last] = value

    return apply


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return apply


# (mutation, field named in the message, task position named in the message or None)
MALFORMED = {
    "format is not 1": (_set("format", 2), "format", None),
    "format is a bool": (_set("format", True), "format", None),
    "name missing": (_drop("name"), "name", None),
    "name not a slug": (_set("name", "My Stream"), "name", None),
    "version empty": (_set("version", ""), "version", None),
    "description missing": (_drop("description"), "description", None),
    "source not a string": (_set("source", ["csv"]), "source", None),
    "cutoff is a string": (_set("meta_test_from_year", "2019"), "meta_test_from_year", None),
    "image size too small": (_set("image_size", 4), "image_size", None),
    "unknown top-level field": (_set("colour", "red"), "colour", None),
    "tasks empty": (_set("tasks", []), "tasks", None),
    "tasks not a list": (_set("tasks", {"1": {}}), "tasks", None),
    "task not an object": (_set("tasks.1", "mnist"), "tasks[]", 2),
    "order gap": (_set("tasks.1.order", 3), "order", 2),
    "order zero": (_set("tasks.0.order", 0), "order", 1),
    "order is a float": (_set("tasks.0.order", 1.0), "order", 1),
    "year goes back": (_set("tasks.2.year", 2005), "year", 3),
    "year is a bool": (_set("tasks.0.year", True), "year", 1),
    "year out of range": (_set("tasks.0.year", 198), "year", 1),
    "dataset without source": (_set("tasks.0.dataset", "digits"), "dataset", 1),
    "dataset with a slash": (_set("tasks.0.dataset", "nevis:voc/2007"), "dataset", 1),
    "dataset upper case": (_set("tasks.0.dataset", "Sklearn:Digits"), "dataset", 1),
    "title missing": (_drop("tasks.1.title"), "title", 2),
    "title blank": (_set("tasks.1.title", "  "), "title", 2),
    "domain not a string": (_set("tasks.0.domain", 5), "domain", 1),
    "kind unknown": (_set("tasks.0.kind", "binary"), "kind", 1),
    "num_classes zero": (_set("tasks.0.num_classes", 0), "num_classes", 1),
    "num_classes negative": (_set("tasks.0.num_classes", -3), "num_classes", 1),
    "num_classes a string": (_set("tasks.0.num_classes", "10"), "num_classes", 1),
    "num_examples zero": (_set("tasks.0.num_examples", 0), "num_examples", 1),
    "phase contradicts year": (_set("tasks.2.phase", "meta_train"), "phase", 3),
    "phase unknown": (_set("tasks.2.phase", "test"), "phase", 3),
    "notes not a string": (_set("tasks.2.notes", None), "notes", 3),
    "unknown task field": (_set("tasks.1.colour", "red"), "colour", 2),
    "split missing": (_drop("tasks.0.split"), "split", 1),
    "split not an object": (_set("tasks.0.split", "random"), "split", 1),
    "split kind unknown": (_set("tasks.0.split.kind", "stratified"), "split.kind", 1),
    "random fractions missing": (_drop("tasks.0.split.fractions"), "split.fractions", 1),
    "random fractions sum to 0.9": (_set("tasks.0.split.fractions.test", 0.1), "split.fractions", 1),
    "random fractions lack test": (
        _set("tasks.0.split.fractions", {"train": 0.8, "dev": 0.1, "dev_test": 0.1}),
        "split.fractions",
        1,
    ),
    "official fractions include test": (_set("tasks.1.split.fractions.test", 0.0), "split.fractions", 2),
    "official fractions sum to 1.1": (_set("tasks.1.split.fractions.train", 0.8), "split.fractions", 2),
    "fraction negative": (_set("tasks.0.split.fractions.dev", -0.1), "split.fractions.dev", 1),
    "fraction is a bool": (_set("tasks.0.split.fractions.dev", True), "split.fractions.dev", 1),
    "fraction is zero": (_set("tasks.1.split.fractions.dev", 0), "split.fractions.dev", 2),
    "provided with fractions": (_set("tasks.2.split.fractions", {"train": 1.0}), "split.fractions", 3),
    "seed negative": (_set("tasks.2.split.seed", -1), "split.seed", 3),
    "seed a string": (_set("tasks.2.split.seed", "0"), "split.seed", 3),
    "split text not a string": (_set("tasks.0.split.text", 1), "split.text", 1),
    "unknown split field": (_set("tasks.0.split.stratify", True), "split.stratify", 1),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_manifest_names_origin_task_and_field(case: str) -> None:
    mutate, field, task = MALFORMED[case]
    doc = valid_doc()
    mutate(doc)

    with pytest.raises(ManifestError) as info:
        parse_manifest(doc, origin=ORIGIN)

    message = str(info.value)
    assert message.startswith(f"Invalid stream manifest {ORIGIN}")
    assert f"'{field}' field" in message
    if task is None:
        assert ", task " not in message
    else:
        assert f", task {task}:" in message


def test_message_says_what_was_given() -> None:
    doc = valid_doc()
    doc["tasks"][0]["split"]["fractions"]["test"] = 0.1

    with pytest.raises(ManifestError, match=r"must sum to 1 for split kind 'random'\. Got 0\.9"):
        parse_manifest(doc, origin=ORIGIN)


def test_document_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(ManifestError, match="must be a JSON object"):
        parse_manifest([1, 2, 3], origin=ORIGIN)  # type: ignore[arg-type]


def test_task_spec_keeps_the_fields_other_modules_use() -> None:
    names = set(TaskSpec.__dataclass_fields__)

    assert {
        "order",
        "year",
        "dataset",
        "title",
        "domain",
        "kind",
        "num_classes",
        "split",
        "phase",
        "notes",
        "num_examples",
    } <= names
