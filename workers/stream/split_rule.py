"""The split rule of a manifest task: its value, its JSON form and its checks.

A rule says how a dataset's rows are dealt into :data:`SPLITS`; :mod:`workers.stream.splits`
applies it. Besides the three general kinds (``random``, ``official_test``, ``provided``)
there are the kinds NEVIS'22's reference implementation (dm_nevis) uses for its custom
splits, so those can be reproduced exactly rather than approximated by a random draw:

- ``official_val``: the source ships train / val / test. Train is drawn ``fractions`` over
  train / dev; val becomes dev_test and test stays test. With ``test_fractions`` (over
  dev_test / test), val is drawn into dev_test and test instead, for sources whose own test
  part has no labels (Pascal VOC 2012).
- ``by_attribute``: rows go to a split by the value of one per-row ``attribute`` (a view-angle
  bin, a subject, a pose, an object instance), listed per split in ``values``. One split may
  be ``"rest"`` (every value not listed elsewhere); test may be ``"source_test"`` (the
  source's test rows, with the attributes placing only the other rows).
- ``held_out``: rows whose ``attribute`` (a domain) is in ``held_out`` are drawn
  ``test_fractions`` over dev_test / test; the others ``fractions`` over train / dev.
- ``held_out_parts``: like ``held_out``, but no draw: the source's train and test parts of
  the kept domains become train and dev, those of the held-out domains dev_test and test.
- ``per_class_counts``: per class, ``counts`` rows go to dev, dev_test and test and the rest
  to train; ``pick`` says which rows: ``"last"`` (the class's last rows in dataset order,
  test last) or ``"random"`` (a seeded shuffle of each class).

A ``random`` rule may say ``"pool": "source_train"``: it then draws over the source's train
and val lists only and leaves the source's test rows out of every split, as the reference
does for IAPRTC-12. It may also name an ``attribute`` and ``train_only`` values: rows with
those values always go to train and only the others are drawn, as the reference does with
Interact's category illustrations.

``approximate`` is empty for a rule that is the source's rule; otherwise it says why not, and
``nevis streams show`` marks the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from workers.stream.manifest_checks import (
    Where,
    check_choice,
    check_fields,
    check_fractions,
    check_int,
    check_object,
    check_str,
)

# Every dataset is cut into these four splits. Learners see train (and, for model
# selection, dev); evaluation uses dev_test in the meta-train phase and test in meta-test.
SPLITS: tuple[str, ...] = ("train", "dev", "dev_test", "test")

SplitKind = Literal[
    "random",
    "official_test",
    "provided",
    "official_val",
    "by_attribute",
    "held_out",
    "held_out_parts",
    "per_class_counts",
]
AttributeValue = int | str
# In ``values``: a split takes every value no other split lists / the source's test rows.
REST = "rest"
SOURCE_TEST = "source_test"
PICKS: tuple[str, ...] = ("last", "random")
SOURCE_TRAIN = "source_train"  # a ``random`` rule's pool: the source's train + val lists
COUNTED_SPLITS: tuple[str, ...] = ("dev", "dev_test", "test")  # train takes the rest


@dataclass(frozen=True)
class SplitRule:
    """How a dataset's examples are dealt into :data:`SPLITS` (kinds: see the module doc).

    - ``random``: a seeded, stratified draw over all examples with ``fractions`` over the
      four splits (summing to 1).
    - ``official_test``: the source's own test set is ``test``; its train set is drawn into
      train / dev / dev_test with ``fractions`` over those three (summing to 1).
    - ``provided``: the dataset ships explicit train / val / test index lists (the npz + JSON
      format); val is halved into dev and dev_test with ``seed``.

    Fields a kind does not use stay empty, so rules of the first three kinds read, compare
    and hash as they always have.
    """

    kind: SplitKind
    fractions: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    text: str = ""  # the rule as written in the source, for people
    attribute: str = ""
    values: Mapping[str, tuple[AttributeValue, ...] | str] = field(default_factory=dict)
    held_out: tuple[AttributeValue, ...] = ()
    test_fractions: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    pick: str = ""
    pool: str = ""  # random only: "" = every row, SOURCE_TRAIN = the source's train + val
    train_only: tuple[AttributeValue, ...] = ()  # random only: attribute values kept in train
    approximate: str = ""  # why this is not exactly the source's rule; "" when it is


@dataclass(frozen=True)
class _KindSpec:
    """Which rule fields a kind takes: required ones, optional ones, fraction key sets."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    fractions: tuple[str, ...] = ()
    test_fractions: tuple[str, ...] = ()


_KINDS: dict[str, _KindSpec] = {
    "random": _KindSpec(("fractions",), ("pool", "attribute", "train_only"), fractions=SPLITS),
    "official_test": _KindSpec(("fractions",), fractions=("train", "dev", "dev_test")),
    "provided": _KindSpec(),
    "official_val": _KindSpec(("fractions",), ("test_fractions",), ("train", "dev"), ("dev_test", "test")),
    "by_attribute": _KindSpec(("attribute", "values")),
    "held_out": _KindSpec(
        ("attribute", "held_out", "fractions", "test_fractions"), (), ("train", "dev"), ("dev_test", "test")
    ),
    "held_out_parts": _KindSpec(("attribute", "held_out")),
    "per_class_counts": _KindSpec(("counts", "pick")),
}
SPLIT_KINDS: tuple[str, ...] = tuple(_KINDS)
_ALWAYS = ("kind", "seed", "text", "approximate")


def parse_split_rule(raw: Any, where: Where) -> SplitRule:
    """Check a task's ``split`` object field by field and build the rule."""
    rule = check_object(raw, where, "split")
    kind = check_choice(rule.get("kind"), where, "split.kind", SPLIT_KINDS)
    spec = _KINDS[kind]
    if not spec.fractions and rule.get("fractions") == {}:  # older files wrote it empty
        rule = {k: v for k, v in rule.items() if k != "fractions"}
    check_fields(rule, where, required=("kind", *spec.required), optional=(*_ALWAYS, *spec.optional), prefix="split.")
    params: dict[str, Any] = {}
    if "fractions" in rule:
        params["fractions"] = check_fractions(
            rule["fractions"], where, "split.fractions", names=spec.fractions, kind=kind
        )
    if "test_fractions" in rule:
        params["test_fractions"] = check_fractions(
            rule["test_fractions"], where, "split.test_fractions", names=spec.test_fractions, kind=kind
        )
    if "attribute" in rule:
        params["attribute"] = check_str(rule["attribute"], where, "split.attribute")
    if "values" in rule:
        params["values"] = _parse_values(rule["values"], where)
    if "held_out" in rule:
        params["held_out"] = _parse_value_list(rule["held_out"], where, "split.held_out")
    if "counts" in rule:
        params["counts"] = _parse_counts(rule["counts"], where)
    if "pick" in rule:
        params["pick"] = check_choice(rule["pick"], where, "split.pick", PICKS)
    if "pool" in rule:
        params["pool"] = check_choice(rule["pool"], where, "split.pool", (SOURCE_TRAIN,))
    if "train_only" in rule:
        params["train_only"] = _parse_value_list(rule["train_only"], where, "split.train_only")
    if ("attribute" in rule) != ("train_only" in rule) and kind == "random":
        missing = "train_only" if "attribute" in rule else "attribute"
        raise where.error(
            f"split.{missing}",
            "is required when a random rule names the other (rows with these attribute values always go to train)",
        )
    return SplitRule(
        kind=cast(SplitKind, kind),
        seed=check_int(rule.get("seed", 0), where, "split.seed", lo=0, hi=2**32 - 1),
        text=check_str(rule.get("text", ""), where, "split.text", allow_empty=True),
        approximate=check_str(rule.get("approximate", ""), where, "split.approximate", allow_empty=True),
        **params,
    )


def _parse_value_list(raw: Any, where: Where, name: str) -> tuple[AttributeValue, ...]:
    """A non-empty list of distinct ints or strings (not both, never booleans)."""
    ok = (
        isinstance(raw, list)
        and raw
        and all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) for v in raw)
    )
    if not ok or len({type(v) for v in raw}) != 1 or len(set(raw)) != len(raw):
        raise where.error(name, "must be a non-empty list of distinct ints or of strings", raw)
    return tuple(raw)


def _parse_values(raw: Any, where: Where) -> dict[str, tuple[AttributeValue, ...] | str]:
    obj = check_object(raw, where, "split.values")
    if set(obj) != set(SPLITS):
        raise where.error("split.values", f"must have exactly the keys {', '.join(SPLITS)}", dict(obj))
    out: dict[str, tuple[AttributeValue, ...] | str] = {}
    seen: set[AttributeValue] = set()
    for split in SPLITS:  # canonical order
        value = obj[split]
        name = f"split.values.{split}"
        if value == REST or (value == SOURCE_TEST and split == "test"):
            out[split] = value
            continue
        if isinstance(value, str):
            must = f"must be a list of values or {REST!r}"
            must += f" or {SOURCE_TEST!r}" if split == "test" else ""
            raise where.error(name, must, value)
        listed = _parse_value_list(value, where, name)
        if seen & set(listed):
            raise where.error(name, "must not repeat a value another split lists", value)
        seen.update(listed)
        out[split] = listed
    if sum(v == REST for v in out.values()) > 1:
        raise where.error("split.values", f"may give {REST!r} for one split only", dict(obj))
    return out


def _parse_counts(raw: Any, where: Where) -> dict[str, int]:
    obj = check_object(raw, where, "split.counts")
    if set(obj) != set(COUNTED_SPLITS):
        must = f"must have exactly the keys {', '.join(COUNTED_SPLITS)} (train takes the rest)"
        raise where.error("split.counts", must, dict(obj))
    counts = {s: check_int(obj[s], where, f"split.counts.{s}", lo=0) for s in COUNTED_SPLITS}
    if not sum(counts.values()):
        raise where.error("split.counts", "must put at least one row outside train", counts)
    return counts


def split_rule_to_dict(rule: SplitRule) -> dict[str, Any]:
    """The document form; fields a kind does not use are left out."""
    out: dict[str, Any] = {"kind": rule.kind, **_params(rule)}
    out["seed"] = rule.seed
    out["text"] = rule.text
    if rule.approximate:
        out["approximate"] = rule.approximate
    return out


def split_rule_key(rule: SplitRule) -> dict[str, Any]:
    """The parts of a rule that decide the split (not its human text), JSON-able."""
    return {"kind": rule.kind, **_params(rule, floats=True), "seed": int(rule.seed)}


def _params(rule: SplitRule, *, floats: bool = False) -> dict[str, Any]:
    """The rule's parameters in a fixed order; ``fractions`` always present when ``floats``."""
    out: dict[str, Any] = {}
    if rule.fractions or floats:
        out["fractions"] = {s: float(rule.fractions[s]) for s in SPLITS if s in rule.fractions}
    if rule.test_fractions:
        out["test_fractions"] = {s: float(rule.test_fractions[s]) for s in SPLITS if s in rule.test_fractions}
    if rule.attribute:
        out["attribute"] = rule.attribute
    if rule.values:
        out["values"] = {s: v if isinstance(v, str) else list(v) for s, v in rule.values.items()}
    if rule.held_out:
        out["held_out"] = list(rule.held_out)
    if rule.counts:
        out["counts"] = {s: int(rule.counts[s]) for s in COUNTED_SPLITS}
    if rule.pick:
        out["pick"] = rule.pick
    if rule.pool:
        out["pool"] = rule.pool
    if rule.train_only:
        out["train_only"] = list(rule.train_only)
    return out


__all__ = [
    "COUNTED_SPLITS",
    "PICKS",
    "REST",
    "SOURCE_TEST",
    "SOURCE_TRAIN",
    "SPLITS",
    "SPLIT_KINDS",
    "AttributeValue",
    "SplitKind",
    "SplitRule",
    "parse_split_rule",
    "split_rule_key",
    "split_rule_to_dict",
]
