"""Check a source's classes and rows per split against what the reference or TFDS fixes.

A download that changed upstream, a truncated archive or a reader that drops rows would
otherwise give a dataset of another size that nothing flags: a paper comparison then rests
on other data. The catalogue's ``expected`` (classes; rows per split, under the readers'
split names) pins them; ``nevis data convert`` and ``nevis data prepare`` refuse a source
that differs unless told, by ``--accept-count-change``, that the change is known, and then
say so in their result (:func:`count_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.errors import DataIntegrityError
from workers.stream.sources.catalogue import Source

ACCEPT_FLAG = "--accept-count-change"


class CountMismatchError(DataIntegrityError):
    """A source's classes or rows per split differ from the catalogue's pinned counts."""


def count_differences(source: Source, classes: int, rows: Mapping[str, int]) -> list[str]:
    """One line per pinned count the data does not match (empty: all match or none pinned)."""
    out = []
    if source.expected_classes is not None and classes != source.expected_classes:
        out.append(f"classes: expected {source.expected_classes}, found {classes}")
    for split, want in (source.expected_rows or {}).items():
        got = int(rows.get(split, 0))
        if got != want:
            out.append(f"split {split!r}: expected {want} rows, found {got}")
    return out


def count_record(source: Source, classes: int, rows: Mapping[str, int], *, accept: bool) -> dict[str, Any]:
    """What a result records of the check; raises unless the counts match or ``accept``.

    Raises:
        CountMismatchError: naming the source, each split (or the classes), expected and found.
    """
    differences = count_differences(source, classes, rows)
    if differences and not accept:
        raise CountMismatchError(
            f"Source {source.key!r} differs from its pinned counts ({source.expected_from}): "
            f"{'; '.join(differences)}. The files may be damaged, truncated or of another "
            f"version: fetch them again; if the change upstream is known, pass {ACCEPT_FLAG} "
            "(the result records that it was used)."
        )
    record: dict[str, Any] = {"classes": classes, "rows": {k: int(v) for k, v in rows.items()}}
    if source.expected_classes is None and not source.expected_rows:
        return {**record, "pinned": None}
    record["pinned"] = {
        "classes": source.expected_classes,
        "rows": dict(source.expected_rows or {}),
        "from": source.expected_from,
    }
    if differences:
        record["accepted_change"] = {"flag": ACCEPT_FLAG, "differences": differences}
    return record


__all__ = ["ACCEPT_FLAG", "CountMismatchError", "count_differences", "count_record"]
