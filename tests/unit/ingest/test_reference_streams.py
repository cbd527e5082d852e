"""The shipped ``nevis22-*-reference`` streams: their parents with every task whose source the
reference keeps in its data folder reading the reference's own split of each row; the TFDS
sources (which cannot be imported) keep the parent's rule; the files are current."""

from __future__ import annotations

from collections import Counter
from importlib import resources

import pytest

from workers.ingest.reference_streams import PARENTS, importable, not_importable, reference_variant, render
from workers.stream.imported_splits import REFERENCE_RULE, REFERENCE_STREAMS
from workers.stream.manifest import manifest_to_dict, parse_manifest
from workers.stream.manifest_files import list_streams, load_stream
from workers.stream.sources.catalogue import load_catalogue

PAIRS = list(zip(PARENTS, REFERENCE_STREAMS, strict=True))


def test_22_sources_cannot_be_imported_all_of_them_read_through_tfds() -> None:
    blocked = not_importable(load_catalogue())
    assert len(blocked) == 22
    assert Counter(s.source_kind for s in blocked) == {"tfds": 19, "tfds_custom_builder": 3}
    assert {"coil100", "smallnorb", "domainnet", "imagenet2012", "mnist"} <= {s.key for s in blocked}
    assert all(importable(s) == (s.source_kind == "handler") for s in load_catalogue().sources)


@pytest.mark.parametrize(("parent_name", "name"), PAIRS)
def test_the_shipped_variant_is_current(parent_name: str, name: str) -> None:
    """Re-deriving from the parent and the catalogue gives the shipped bytes
    (scripts/build_reference_streams.py writes them)."""
    shipped = resources.files("workers.stream").joinpath(f"manifests/{name}.json").read_text(encoding="utf-8")
    assert render(reference_variant(load_stream(parent_name), load_catalogue())) == shipped


@pytest.mark.parametrize(("parent_name", "name", "kept", "tfds"), [(*PAIRS[0], 79, 27), (*PAIRS[1], 17, 12)])
def test_a_variant_loads_and_reads_the_reference_split_where_the_source_can_be_imported(
    parent_name: str, name: str, kept: int, tfds: int
) -> None:
    assert name in list_streams()
    variant, parent = load_stream(name), load_stream(parent_name)
    assert variant.name == name and variant.version == parent.version
    assert parse_manifest(manifest_to_dict(variant), origin=name) == variant
    assert (len(variant.meta_train), len(variant.meta_test)) == (len(parent.meta_train), len(parent.meta_test))
    catalogue = load_catalogue()
    reading = 0
    for ours, theirs in zip(variant.tasks, parent.tasks, strict=True):
        same = ("order", "year", "phase", "dataset", "title", "domain", "kind", "num_classes", "num_examples")
        assert [getattr(ours, f) for f in same] == [getattr(theirs, f) for f in same]
        if importable(catalogue.find(ours.dataset)):
            assert ours.split == REFERENCE_RULE, ours.key
            assert f"parent's rule: {theirs.split.text}" in ours.notes
            reading += 1
        else:
            assert ours.split == theirs.split, ours.key
    assert (reading, len(variant.tasks) - reading) == (kept, tfds)
    assert f"{kept} of the {len(variant.tasks)} tasks" in variant.description
    assert parent_name in variant.source and "build_reference_streams.py" in variant.source


def test_the_reference_rule_places_each_reference_split_in_its_own_split() -> None:
    assert REFERENCE_RULE.kind == "by_attribute" and REFERENCE_RULE.attribute == "reference_split"
    assert dict(REFERENCE_RULE.values) == {s: (s,) for s in ("train", "dev", "dev_test", "test")}
    assert REFERENCE_RULE.approximate == ""
