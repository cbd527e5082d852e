"""``nevis streams``: list the built-in streams, show one stream's tasks, derive a variant.

``show`` takes a built-in name or the path of a user's manifest file. With ``--json`` only
JSON goes to stdout (the manifest, its sha256 and a summary), so it can be piped.

``derive`` writes the shuffled streams of the paper's ordering ablation
(:mod:`workers.stream.derive`) as manifest files, so they run like any user stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.table import Table

from services.cli.console import make_console
from services.core.errors import ConfigError
from workers.stream.derive import check_mode, check_seed, derive_manifest
from workers.stream.manifest import SPLITS, SplitRule, StreamManifest, manifest_to_dict
from workers.stream.manifest_files import list_streams, load_stream, manifest_sha256

app = typer.Typer(no_args_is_help=True, help="List, inspect and derive stream manifests.")

_PHASE_LABEL = {"meta_train": "meta-train", "meta_test": "meta-test"}


def summarize(manifest: StreamManifest) -> dict[str, Any]:
    """Counts a reader checks first: tasks per phase, multi-label tasks, distinct datasets."""
    return {
        "tasks": len(manifest.tasks),
        "per_phase": {"meta_train": len(manifest.meta_train), "meta_test": len(manifest.meta_test)},
        "datasets": len(manifest.datasets),
        "multi_label_tasks": [
            {"order": t.order, "year": t.year, "dataset": t.dataset, "title": t.title}
            for t in manifest.tasks
            if t.kind == "multi"
        ],
        "approximate_splits": [
            {"order": t.order, "dataset": t.dataset, "why": t.split.approximate}
            for t in manifest.tasks
            if t.split.approximate
        ],
    }


@app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the built-in streams with their task counts per phase."""
    rows = []
    for name in list_streams():
        manifest = load_stream(name)
        rows.append(
            {
                "name": name,
                "version": manifest.version,
                "tasks": len(manifest.tasks),
                "meta_train": len(manifest.meta_train),
                "meta_test": len(manifest.meta_test),
                "description": manifest.description,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "version", "tasks", "meta-train", "meta-test", title="Built-in streams")
    for row in rows:
        counts = (str(row[k]) for k in ("tasks", "meta_train", "meta_test"))
        table.add_row(row["name"], row["version"], *counts)
    console = make_console()
    console.print(table)
    console.print("Details: nevis streams show NAME (NAME may also be a path to a .json file)")


@app.command("show")
def show_command(
    name: str = typer.Argument(..., help="A built-in stream name, or a path to a .json manifest."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest and a summary as JSON."),
) -> None:
    """Show a stream's tasks: order, year, phase, dataset, kind, classes, size and split."""
    manifest = load_stream(name)
    summary = summarize(manifest)
    digest = manifest_sha256(manifest)
    if as_json:
        doc = {"manifest": manifest_to_dict(manifest), "sha256": digest, "summary": summary}
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{manifest.name} {manifest.version}: {len(manifest.tasks)} tasks", box=box.SIMPLE_HEAD)
    for header in ("order", "year", "phase", "dataset", "domain", "kind", "classes", "examples"):
        table.add_column(header, no_wrap=True)
    table.add_column("split", overflow="fold")
    for task in manifest.tasks:
        table.add_row(
            str(task.order),
            str(task.year),
            _PHASE_LABEL[task.phase],
            task.dataset,
            task.domain or "-",
            task.kind,
            _or_dash(task.num_classes),
            _or_dash(task.num_examples),
            split_label(task.split),
        )
    console = make_console()
    console.print(manifest.description, highlight=False)
    console.print(table)
    per_phase = summary["per_phase"]
    console.print(
        f"Totals: {summary['tasks']} tasks, {per_phase['meta_train']} meta-train, "
        f"{per_phase['meta_test']} meta-test (from {manifest.meta_test_from_year}); "
        f"{len(summary['multi_label_tasks'])} multi-label; {summary['datasets']} distinct "
        f"datasets; sha256 {digest[:12]}",
        highlight=False,
    )
    for item in summary["approximate_splits"]:
        console.print(
            f"{APPROXIMATE_MARK}task {item['order']} ({item['dataset']}): split approximates the "
            f"source's rule: {item['why']}",
            highlight=False,
        )


@app.command("derive")
def derive_command(
    name: str = typer.Argument(..., help="A built-in stream name, or a path to a .json manifest."),
    shuffle: str = typer.Option(
        ...,
        "--shuffle",
        help="within-years: shuffle tasks among those of the same year. all: shuffle the "
        "whole meta-train phase and, separately, the whole meta-test phase (the meta-test "
        "tasks stay the meta-test set; every task keeps its year).",
    ),
    seed: int = typer.Option(..., "--seed", help="Seed of the shuffle (>= 0): same seed, same file."),
    out: Path = typer.Option(..., "--out", help="The .json manifest file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
) -> None:
    """Write a shuffled variant of a stream (the ordering ablation) as a new manifest file.

    The variant is named <stream>-shuffled-<mode>-s<seed>, versioned <version>+<mode>.s<seed>,
    and records its parent (name, version, sha256), mode and seed under "derived_from".
    Run it with: nevis run --stream OUT.json
    """
    check_mode(shuffle)
    check_seed(seed)
    parent = load_stream(name)
    _check_out(out, force=force)
    derived = derive_manifest(parent, mode=shuffle, seed=seed)
    text = json.dumps(manifest_to_dict(derived), indent=2, ensure_ascii=False) + "\n"
    out.write_text(text, encoding="utf-8")
    moved = sum(a != replace(b, order=a.order) for a, b in zip(parent.tasks, derived.tasks, strict=True))
    typer.echo(
        f"Wrote {out}: {derived.name} {derived.version}, {len(derived.tasks)} tasks "
        f"({len(derived.meta_train)} meta-train, {len(derived.meta_test)} meta-test), "
        f"{moved} at a new position; sha256 {manifest_sha256(derived)[:12]}"
    )


def _check_out(out: Path, *, force: bool) -> None:
    """Refuse an --out that would not load as a stream, or would overwrite unasked."""
    if out.suffix != ".json":
        problem = "must end in .json (a stream is read from a path by that suffix)"
    elif out.is_dir():
        problem = "is a folder; give the path of a .json file"
    elif out.exists() and not force:
        problem = "already exists; pass --force to overwrite it"
    elif not out.parent.is_dir():
        problem = f"is in a folder that does not exist ({out.parent})"
    else:
        return
    raise ConfigError(f"--out {out} {problem}.", field="out")


APPROXIMATE_MARK = "~ "  # before the split of a task whose rule only approximates the source's


def split_label(rule: SplitRule) -> str:
    """A short rendering such as ``random 56/12/12/20 s0`` or ``official 70/15/15``.

    A rule that is not exactly the source's starts with :data:`APPROXIMATE_MARK`.
    """
    mark = APPROXIMATE_MARK if rule.approximate else ""
    return mark + _rule_label(rule)


def _rule_label(rule: SplitRule) -> str:
    shares = _shares(rule.fractions)
    if rule.kind == "random":
        pool = " (source train)" if rule.pool else ""
        fixed = f" ({rule.attribute} {','.join(map(str, rule.train_only))} in train)"
        return f"random {shares} s{rule.seed}{pool}{fixed if rule.train_only else ''}"
    if rule.kind == "official_test":
        return f"official {shares}"
    if rule.kind == "official_val":
        val = f"val {_shares(rule.test_fractions)}" if rule.test_fractions else "val=dev_test"
        return f"official-val {shares} {val}"
    if rule.kind == "by_attribute":
        return f"by {rule.attribute}"
    if rule.kind in ("held_out", "held_out_parts"):
        held = ",".join(str(v) for v in rule.held_out)
        parts = " parts" if rule.kind == "held_out_parts" else ""
        return f"held-out {rule.attribute}={held}{parts}"
    if rule.kind == "per_class_counts":
        counts = "/".join(str(rule.counts[k]) for k in SPLITS if k in rule.counts)
        return f"per-class {counts} ({rule.pick})"
    return f"provided s{rule.seed}"


def _shares(fractions: Mapping[str, float]) -> str:
    return "/".join(f"{fractions[k] * 100:.3g}" for k in SPLITS if k in fractions)


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


__all__ = ["APPROXIMATE_MARK", "app", "derive_command", "list_command", "show_command", "split_label", "summarize"]
