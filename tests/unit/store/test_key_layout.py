"""One key layout: every builder's key belongs to exactly one declared family, and no code
outside the layout writes a key it spelled itself (a source scan)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.store import key_layout as kl
from services.store.key_families import COLLECTED_PREFIXES, FAMILIES, KeyFamily, family_of

ROOT = Path(__file__).resolve().parents[3]
LAYOUT = {ROOT / "services/store/key_layout.py", ROOT / "services/store/key_families.py"}
TRIAL = kl.trial_prefix(kl.attempt_prefix(12, 3, 2), 4)
DATASET = kl.dataset_prefix("shapes", "shape", 32)
SHA = "ab" * 32
BUILT = {
    "dataset index": kl.index_key(DATASET),
    "dataset shard": kl.shard_key(DATASET, "dev_test", 7),
    "train-order stage": kl.stage_key(DATASET, 3, 1),
    "learner bundle": kl.bundle_key(SHA, "learner.tar.gz"),
    "pretrained checkpoint": kl.pretrained_key(SHA),
    "checkpoint": kl.checkpoint_key(TRIAL, 1500),
    "predictor": kl.predictor_key(12, 3, 2, 4),
    "learner state": kl.trial_state_key(TRIAL),
    "trial log": kl.trial_log_key(TRIAL),
    "rank log": kl.trial_log_key(TRIAL, rank=3),
    "prediction log": kl.predict_log_key(kl.attempt_prefix(12, 3, 2)),
    "preparation log": kl.prepare_log_key(kl.attempt_prefix(12, 3, 2)),
    "predictions": kl.predictions_key(12, 3, 2),
    "transfer record": kl.transfer_record_key(12, 3, 2),
    "kept interval": kl.interval_key(12, "0f" * 12),
    "probe features": kl.features_key("0123abcd", 9),
}
# Text that only a key of the layout contains: a root and its slash, or a family's file name.
MARKERS = (
    *(root + "/" for root in kl.ROOTS),
    "/ckpt-",
    "/stage/",
    "-rank-",
    "e-interval-",
    kl.PREDICTOR_FILE,
    kl.STATE_FILE,
    kl.PREDICT_LOG_FILE,
    kl.PREPARE_LOG_FILE,
    kl.PREDICTIONS_FILE,
    kl.TRANSFER_FILE,
)
WRITES = {"put_bytes", "put_file", "put"}  # the store's writes and the trainer harness's


@pytest.mark.parametrize("name", sorted(BUILT))
def test_each_builder_makes_a_key_of_exactly_its_family(name: str) -> None:
    key = BUILT[name]
    assert [f.name for f in FAMILIES if f.matches(key)] == [name]
    assert family_of(key) is not None and family_of(key).root in COLLECTED_PREFIXES


def test_every_family_is_built_here() -> None:
    assert sorted(f.name for f in FAMILIES) == sorted(BUILT)


def test_a_family_outside_the_roots_is_refused() -> None:
    with pytest.raises(ValueError, match="must lie under one of"):
        KeyFamily("stray", "elsewhere", r"elsewhere/.+", "nowhere.py", "nothing")


def test_a_transfer_record_lives_with_its_attempts_predictions() -> None:
    family = family_of(kl.transfer_record_key(12, 3, 2))
    assert family is not None and family.kept_with(kl.transfer_record_key(12, 3, 2)) == kl.predictions_key(12, 3, 2)


def test_a_rank_log_lives_with_its_trial_log() -> None:
    family = family_of(kl.trial_log_key(TRIAL, rank=2))
    assert family is not None and family.kept_with is not None
    assert family.kept_with(kl.trial_log_key(TRIAL, rank=2)) == kl.trial_log_key(TRIAL)


def _sources() -> Iterator[Path]:
    for package in ("services", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in LAYOUT and "migrations" not in path.parts:
                yield path


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the module, class and function docstring nodes (prose may name a key)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _literal_text(node: ast.AST) -> str | None:
    """The literal text of a str constant or an f-string's fixed parts; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _written_key(call: ast.Call) -> ast.AST | None:
    """The key argument of a store or harness write: ``x.put_bytes(key, ...)``,
    ``harness.put.remote(key, ...)``, ``_ask(harness.put, key, ...)``, ``_put(spec, key, ...)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in WRITES and call.args:
        return call.args[0]
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "remote"
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "put"
        and call.args
    ):
        return call.args[0]
    if len(call.args) > 1 and (
        isinstance(call.args[0], ast.Attribute)
        and call.args[0].attr == "put"
        or isinstance(func, ast.Name)
        and func.id == "_put"
    ):
        return call.args[1]
    return None


def spelled_keys(path: Path) -> list[str]:
    """``path:line`` of each key the module spells itself instead of asking the layout."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _docstrings(tree) | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            key = _written_key(node)
            if key is not None and isinstance(key, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} writes a key it spelled")
        if id(node) in skipped:  # prose, or a part of an f-string checked whole
            continue
        text = _literal_text(node)
        if text is not None and any(marker in text for marker in MARKERS):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} spells {text!r}")
    return found


def test_no_code_outside_the_layout_spells_a_key() -> None:
    found = [hit for path in _sources() for hit in spelled_keys(path)]
    assert found == [], "\n".join(found)


def test_the_scan_catches_a_spelled_key(tmp_path: Path) -> None:
    module = tmp_path / "writer.py"
    module.write_text(
        '"""Writes runs/1/x."""\n\n'
        "def write(store, harness, prefix, data):\n"
        '    store.put_bytes(f"{prefix}/notes.txt", data)\n'
        '    harness.put.remote(prefix + "/x", data)\n'
        '    key = f"runs/{prefix}/state.pkl"\n'
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = spelled_keys(module)
    finally:
        ROOT = saved
    assert hits == [
        "writer.py:4 writes a key it spelled",
        "writer.py:5 writes a key it spelled",
        "writer.py:6 spells 'runs//state.pkl'",
    ]
