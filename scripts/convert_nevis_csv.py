"""One-time converter: the NEVIS'22 stream table (CSV) -> the project's JSON manifests.

Reads ``../shared/streams/nevis22_dm_nevis.csv`` (both NEVIS'22 streams, in order, taken
from the public reference implementation) and writes ``nevis22-full.json`` and
``nevis22-short.json`` into ``workers/stream/manifests/``. Every document goes through
:func:`workers.stream.manifest.parse_manifest` before it is written, and the FULL stream
must come out as 106 tasks, 79 meta-train and 27 meta-test, or nothing is written.

Split rules: every rule of the table is mapped by the explicit tables in :func:`split_rule`
to a rule kind of :mod:`workers.stream.split_rule`: the regular ``random a/b/c/d`` and
``train->a/b/c; test=...`` forms, the official-validation rule, and the reference's custom
splits (view angle, subject, pose, object instance, held-out domain, per-class counts), with
the reference's own lists, each read from github.com/google-deepmind/dm_nevis. The text stays
in ``split.text``. A rule that is not exactly the reference's would carry
``split.approximate`` saying why (none does now). A rule the tables do not know stops the
script, so nothing is guessed silently.

Usage::

    .venv/bin/python scripts/convert_nevis_csv.py            # write the two manifests
    .venv/bin/python scripts/convert_nevis_csv.py --check    # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.stream.manifest import MANIFEST_FORMAT, manifest_to_dict, parse_manifest

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "streams" / "nevis22_dm_nevis.csv"
DEFAULT_OUT = REPO / "workers" / "stream" / "manifests"
CSV_COLUMNS = ["stream", "order", "year", "dataset", "domain", "num_classes", "multilabel", "notes"]
META_TEST_FROM_YEAR = 2019
VERSION = "1.1"  # 1.1: the reference's custom split rules (was 1.0: approximations)
REFERENCE = (
    "the public NEVIS'22 reference implementation, https://github.com/google-deepmind/dm_nevis "
    "(dm_nevis/streams/nevis_stream.py); paper: Bornschein et al., 'NEVIS'22: A Stream of 100 "
    "Tasks Sampled from 30 Years of Computer Vision Research', arXiv:2211.11747"
)
# stream in the CSV -> (manifest name, expected (tasks, meta-train, meta-test), label)
STREAMS: dict[str, tuple[str, tuple[int, int, int], str]] = {
    "FULL": ("nevis22-full", (106, 79, 27), "full"),
    "SHORT": ("nevis22-short", (29, 24, 5), "short"),
}
DOMAIN_ALIASES = {"faces": "face"}  # one row says "faces"; every other face task says "face"
DEFAULT_RANDOM = (0.56, 0.12, 0.12, 0.20)  # the table's own most common random rule
DEFAULT_OFFICIAL = (0.70, 0.15, 0.15)  # the table's own most common official-test rule

# A note segment that belongs to the split rule (the rest are facts about the dataset).
_SPLIT_SEGMENT = re.compile(
    r"^(split\b|test=|dev[-_]test\b|train\b|train/dev|rest\b|per subject|per-class split"
    r"|subject-disjoint|custom (per-subject )?split|orig train|TFDS (train|validation)"
    r"|first \d+ frames|verified_train|same protocol as)"
)
_SRC = re.compile(r"^src=(?P<loader>nevis|tfds):(?P<name>[^\s(]+)")
_PHASE_MARK = {
    "phase=meta-train(<2019)": "meta_train",
    "phase=meta-test(>=2019)": "meta_test",
    "before2019=yes": "meta_train",
    "before2019=no": "meta_test",
}


class ConversionError(Exception):
    """The CSV says something this converter does not know how to map."""


# ---------------------------------------------------------------------------- split rules


def _shares(weights: tuple[float, ...]) -> list[float]:
    """Normalise to fractions with 4 decimals that sum to 1 (the last one takes the rest)."""
    total = sum(weights)
    head = [round(w / total, 4) for w in weights[:-1]]
    return [*head, round(1.0 - sum(head), 4)]


def _random(weights: tuple[float, ...], seed: int = 0) -> dict[str, Any]:
    names = ("train", "dev", "dev_test", "test")
    return {"kind": "random", "fractions": dict(zip(names, _shares(weights))), "seed": seed}


def _official(weights: tuple[float, ...]) -> dict[str, Any]:
    names = ("train", "dev", "dev_test")
    return {"kind": "official_test", "fractions": dict(zip(names, _shares(weights))), "seed": 0}


def _ints(match: re.Match[str], *groups: str) -> tuple[int, ...]:
    return tuple(int(match[g]) for g in groups)


def _random_rule(m: re.Match[str]) -> dict[str, Any]:
    """``random a/b/c/d ... (seed s)``, optionally ``over orig training part`` (IAPRTC-12,
    handlers/iaprtc12.py: the draw covers training + validation; testing is left out)."""
    rule = _random(_ints(m, "a", "b", "c", "d"), int(m["s"]))
    if m["rest"] == " over orig training part":
        return {**rule, "pool": "source_train"}
    if m["rest"]:
        raise ConversionError(f"no mapping for the random rule's tail {m['rest']!r}")
    return rule


def _official_val(train_dev: tuple[int, ...], val: tuple[int, ...] = ()) -> dict[str, Any]:
    rule: dict[str, Any] = {"kind": "official_val", "fractions": dict(zip(("train", "dev"), _shares(train_dev)))}
    if val:
        rule["test_fractions"] = dict(zip(("dev_test", "test"), _shares(val)))
    return {**rule, "seed": 0}


def _by_attribute(attribute: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "by_attribute", "attribute": attribute, "values": values, "seed": 0}


# The reference's own lists (github.com/google-deepmind/dm_nevis, read for this converter).
# COIL-100, benchmarker/datasets/builders/coil100.py: 72 angle bins of 5 degrees.
COIL100_ANGLE_BINS: dict[str, Any] = {
    "train": [70, 71, 0, 1, 2],
    "dev": [16, 17, 18, 19, 20],
    "dev_test": [50, 51, 52, 53, 54],
    "test": "rest",
}
# BIWI, datasets_storage/handlers/biwi.py: subject ids (folder faces_0/<id>).
BIWI_SUBJECTS: dict[str, Any] = {
    "train": [5, 6, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24],
    "dev": [2, 7],
    "dev_test": [3, 9],
    "test": [1, 4, 8, 10],
}
# Extended YaleB, datasets_storage/handlers/extended_yaleb.py: split by pose id, not subject.
YALEB_POSES: dict[str, Any] = {
    "train": ["P00", "P02", "P03", "P04", "P07"],
    "dev": ["P05"],
    "dev_test": ["P01"],
    "test": ["P06", "P08"],
}
# smallNORB, benchmarker/datasets/builders/smallnorb.py: instances of the official train part.
NORB_INSTANCES: dict[str, Any] = {"train": [7, 8, 9], "dev": [4], "dev_test": [6], "test": "source_test"}


def _coil100(m: re.Match[str]) -> tuple[dict[str, Any], str]:
    sizes = _ints(m, "bins", "a", "b", "c", "d")
    bins = COIL100_ANGLE_BINS
    expected = (
        len(bins["train"]),
        100 * len(bins["train"]),
        100 * len(bins["dev"]),
        100 * len(bins["dev_test"]),
        100 * (72 - 15),
    )
    if sizes != expected:
        raise ConversionError(f"COIL-100 sizes {sizes} do not match the reference bins")
    return _by_attribute("angle_bin", bins), ""


def _norb(m: re.Match[str]) -> tuple[dict[str, Any], str]:
    if _ints(m, "a", "b", "c") != tuple(len(NORB_INSTANCES[s]) for s in SPLITS_3):
        raise ConversionError(f"NORB instance counts {m.group(0)!r} differ from the reference")
    return _by_attribute("instance", NORB_INSTANCES), ""


def _counts(dev: int, dev_test: int, test: int, pick: str) -> dict[str, Any]:
    counts = {"dev": dev, "dev_test": dev_test, "test": test}
    return {"kind": "per_class_counts", "counts": counts, "pick": pick, "seed": 0}


def _brodatz(m: re.Match[str]) -> tuple[dict[str, Any], str]:
    n, a, b, c, d = _ints(m, "n", "a", "b", "c", "d")
    if a + b + c + d != n:
        raise ConversionError(f"crop counts {m.group(0)!r} do not add up")
    return _counts(b, c, d, "random"), ""


SPLITS_3 = ("train", "dev", "dev_test")
LFW_RULE = _counts(1, 1, 2, "last")  # handlers/lfw.py and lfwa.py: last 2 test, 1, 1, rest


# Each entry: pattern, builder(match) -> (rule, approximate). ``approximate`` is "" for a
# rule that is the reference's; otherwise why it is not, and the manifest says so.
_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[dict[str, Any], str]]]
_RULES: list[_Rule] = [
    (
        re.compile(
            r"^random (?P<a>\d+)/(?P<b>\d+)/(?P<c>\d+)/(?P<d>\d+) train/dev/dev-test/test "
            r"\(seed (?P<s>\d+)\)(?P<rest>.*)$"
        ),
        lambda m: (_random_rule(m), ""),
    ),
    (
        re.compile(
            r"^(orig|TFDS) train->(?P<a>\d+)/(?P<b>\d+)/(?P<c>\d+) train/dev/dev[-_]test; "
            r"test=(orig|TFDS) test$"
        ),
        lambda m: (_official(_ints(m, "a", "b", "c")), ""),
    ),
    (  # a source-defined test part and a stated train/dev/dev-test triple
        re.compile(
            r"^(?!.*\d+/\d+/\d+/)(?=.*(test=|rest test))"
            r".*?(?P<a>\d+)/(?P<b>\d+)/(?P<c>\d+)(?!/).*$"
        ),
        lambda m: (_official(_ints(m, "a", "b", "c")), ""),
    ),
    (  # NORB: the official train part split by object instance
        re.compile(
            r"split by instance: (?P<a>\d+) train/(?P<b>\d+) dev/(?P<c>\d+) dev_test; "
            r"test=orig test$"
        ),
        _norb,
    ),
    (  # Pascal VOC 2012: TFDS test has no labels, so validation gives dev_test and test
        re.compile(
            r"^TFDS train->(?P<a>\d+)/(?P<b>\d+) train/dev; "
            r"TFDS validation->(?P<c>\d+)/(?P<d>\d+) dev_test/test$"
        ),
        lambda m: (_official_val(_ints(m, "a", "b"), _ints(m, "c", "d")), ""),
    ),
    (  # the official-validation rule: train -> train/dev, val -> dev_test, test -> test
        re.compile(
            r"^(orig |TFDS )?train( annots)?->(?P<a>\d+)/(?P<b>\d+) train/dev; "
            r"(dev[-_]test=(TFDS validation|ISIC val|trans_val); test=(TFDS test|ISIC test"
            r"|trans_test)|dev-test,test=other orig splits)$"
        ),
        lambda m: (_official_val(_ints(m, "a", "b")), ""),
    ),
    (  # PACS, Office-Caltech: one domain held out for dev_test / test
        re.compile(
            r"^train/dev (?P<a>\d+)/(?P<b>\d+) from [\w+ ]+?; "
            r"dev-test/test (?P<c>\d+)/(?P<d>\d+) from (?P<held>\w+)( domain)?$"
        ),
        lambda m: (
            {
                "kind": "held_out",
                "attribute": "domain",
                "held_out": [m["held"].lower()],
                "fractions": dict(zip(("train", "dev"), _shares(_ints(m, "a", "b")))),
                "test_fractions": dict(zip(("dev_test", "test"), _shares(_ints(m, "c", "d")))),
                "seed": 0,
            },
            "",
        ),
    ),
    (  # DomainNet: the source's own train / test parts of each domain
        re.compile(r"^train/dev=train/test of [\w,]+; dev_test/test=(?P<held>\w+) train/test$"),
        lambda m: ({"kind": "held_out_parts", "attribute": "domain", "held_out": [m["held"]], "seed": 0}, ""),
    ),
    (re.compile(r"^(?P<n>\d+) crops/class (?P<a>\d+)/(?P<b>\d+)/(?P<c>\d+)/(?P<d>\d+)$"), _brodatz),
    (
        re.compile(r"^per-class split test (?P<t>\d+)%, dev/dev-test (?P<d>\d+)% of rest$"),
        lambda m: (
            _random(
                (
                    (100 - int(m["t"])) * (100 - 2 * int(m["d"])),
                    (100 - int(m["t"])) * int(m["d"]),
                    (100 - int(m["t"])) * int(m["d"]),
                    100 * int(m["t"]),
                )
            ),
            "",  # a stratified random draw with exactly these shares
        ),
    ),
    (
        re.compile(
            r"^split by view angle: train (?P<bins>\d+) bins \((?P<a>\d+) imgs\) dev (?P<b>\d+) "
            r"dev_test (?P<c>\d+) test (?P<d>\d+)$"
        ),
        _coil100,
    ),
    (
        re.compile(
            r"^(per subject last 2 test, 1 dev-test, 1 dev, rest train"
            r"|same protocol as LFW \(aligned images\))$"
        ),
        lambda m: (LFW_RULE, ""),
    ),
    (re.compile(r"^subject-disjoint splits$"), lambda m: (_by_attribute("subject", BIWI_SUBJECTS), "")),
    (  # the CSV says per-subject; handlers/extended_yaleb.py splits by pose
        re.compile(r"^custom per-subject split$"),
        lambda m: (_by_attribute("pose", YALEB_POSES), ""),
    ),
    (  # ShanghaiTech, handlers/shanghai_tech.py: parts A+B train -> 70/15/15, A+B test -> test
        re.compile(r"^custom split$"),
        lambda m: (_official(DEFAULT_OFFICIAL), ""),
    ),
]


# Datasets whose reference rule says more than the table's text (the same text as another
# dataset's): dataset key -> (the table's text, rule). The text is checked, so a changed
# table stops the script.
_DATASET_RULES: dict[str, tuple[str, dict[str, Any]]] = {
    # handlers/interact.py: real images drawn per class as CMU AMP's rule; every category
    # illustration goes to train.
    "nevis:interact": (
        "per-class split test 20%, dev/dev-test 15% of rest",
        {**_random((56, 12, 12, 20)), "attribute": "image_set", "train_only": ["illustration"]},
    )
}


def split_rule(text: str, dataset: str = "") -> tuple[dict[str, Any], str]:
    """Map a split rule as written in the table to (rule document, why it is approximate).

    The second item is "" when the rule is the reference's own. ``dataset`` selects the few
    rules of :data:`_DATASET_RULES` that the text alone does not determine.
    """
    if dataset in _DATASET_RULES:
        expected, rule = _DATASET_RULES[dataset]
        if text != expected:
            raise ConversionError(f"{dataset}: the table now says {text!r}, not {expected!r}")
        return {**rule, "text": text}, ""
    for pattern, build in _RULES:
        match = pattern.search(text)
        if match:
            rule, approximate = build(match)
            return {**rule, "text": text}, approximate
    raise ConversionError(f"no mapping for split rule {text!r}; add one to _RULES")


# ---------------------------------------------------------------------------- rows


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every row of the table, with its header checked."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != CSV_COLUMNS:
            raise ConversionError(f"{path}: columns {reader.fieldnames}, expected {CSV_COLUMNS}")
        return list(reader)


def task_doc(row: dict[str, str], seen: set[str]) -> dict[str, Any]:
    """One manifest task from one CSV row; ``seen`` holds earlier dataset keys."""
    where = f"{row['stream']} row {row['order']}"
    src, stated_phase, split_parts, facts = None, None, [], []
    for segment in (s.strip() for s in row["notes"].split(";")):
        if segment.startswith("src="):
            src = segment
        elif segment in _PHASE_MARK:
            stated_phase = _PHASE_MARK[segment]
        elif _SPLIT_SEGMENT.match(segment) or "->" in segment:
            split_parts.append(segment.removeprefix("split="))
        elif segment:
            facts.append(segment)
    match = _SRC.match(src or "")
    if match is None or stated_phase is None or not split_parts:
        raise ConversionError(f"{where}: notes lack src=, a phase mark or a split rule")
    key = "nevis:" + re.sub(r"[^a-z0-9_]+", "_", match["name"].lower()).strip("_")
    if any(f.startswith("REPEAT") for f in facts) and key not in seen:
        raise ConversionError(f"{where}: marked REPEAT but {key} has not appeared before")
    seen.add(key)

    year = int(row["year"])
    phase = "meta_test" if year >= META_TEST_FROM_YEAR else "meta_train"
    if phase != stated_phase:
        raise ConversionError(f"{where}: year {year} gives {phase}, the table says {stated_phase}")
    multilabel = row["multilabel"].strip()
    if multilabel not in ("yes", "no"):
        raise ConversionError(f"{where}: multilabel must be yes or no, got {multilabel!r}")

    split, approximate = split_rule("; ".join(split_parts), key)
    if approximate:
        split["approximate"] = approximate
    domain = row["domain"].strip() or None
    notes = [f"loader={src.removeprefix('src=')}", *facts]
    if domain in DOMAIN_ALIASES:
        notes.append(f"domain {domain!r} in the source")
        domain = DOMAIN_ALIASES[domain]
    return {
        "order": int(row["order"]),
        "year": year,
        "phase": phase,
        "dataset": key,
        "title": row["dataset"].strip(),
        "domain": domain,
        "kind": "multi" if multilabel == "yes" else "single",
        "num_classes": int(row["num_classes"]) if row["num_classes"].strip() else None,
        "num_examples": None,
        "split": split,
        "notes": "; ".join(notes),
    }


def build_manifests(csv_path: Path = DEFAULT_CSV) -> dict[str, dict[str, Any]]:
    """Manifest documents by name, validated and counted; raises ConversionError."""
    rows = read_rows(csv_path)
    digest = hashlib.sha256(csv_path.read_bytes()).hexdigest()
    unknown = {r["stream"] for r in rows} - set(STREAMS)
    if unknown:
        raise ConversionError(f"{csv_path}: unknown streams {sorted(unknown)}")
    out: dict[str, dict[str, Any]] = {}
    for stream, (name, expected, label) in STREAMS.items():
        seen: set[str] = set()
        tasks = [task_doc(r, seen) for r in rows if r["stream"] == stream]
        n_train = sum(t["phase"] == "meta_train" for t in tasks)
        counts = (len(tasks), n_train, len(tasks) - n_train)
        if counts != expected:
            raise ConversionError(f"{stream}: (tasks, meta-train, meta-test) = {counts}, expected {expected}")
        years = f"{tasks[0]['year']}-{tasks[-1]['year']}"
        doc = {
            "format": MANIFEST_FORMAT,
            "name": name,
            "version": VERSION,
            "description": (
                f"NEVIS'22 {label} stream: {counts[0]} image-classification tasks from computer-"
                f"vision papers of {years}, in order. Meta-train: the {counts[1]} tasks before "
                f"{META_TEST_FROM_YEAR}; meta-test: the {counts[2]} from {META_TEST_FROM_YEAR} "
                "on. A dataset that recurs is a separate task each time."
            ),
            "source": (
                f"Converted by scripts/convert_nevis_csv.py from ../shared/streams/"
                f"{csv_path.name} (stream {stream}, sha256 {digest}), a table taken from "
                f"{REFERENCE}."
            ),
            "meta_test_from_year": META_TEST_FROM_YEAR,
            "tasks": tasks,
        }
        # Round-trip through the parser so the file is exactly its canonical form.
        out[name] = manifest_to_dict(parse_manifest(doc, origin=f"{name} (converted)"))
    return out


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="the NEVIS'22 table")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="manifests folder")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    try:
        docs = build_manifests(args.csv)
    except (ConversionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = []
    for name, doc in docs.items():
        path = args.out / f"{name}.json"
        text = render(doc)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.write_text(text, encoding="utf-8")
        n_test = sum(t["phase"] == "meta_test" for t in doc["tasks"])
        print(f"wrote {path}: {len(doc['tasks'])} tasks, {n_test} meta-test")
    if stale:
        print(f"stale (re-run without --check): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
