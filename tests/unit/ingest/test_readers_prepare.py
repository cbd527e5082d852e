"""Converted sources go all the way through ``nevis data prepare``: a stream of the SHORT
stream's own tasks on COIL-100 (split by view angle), LFW (per-person counts) and Brodatz
(crops), each converted from its fixture archive, is prepared into shards with its rule.
The fixtures are not the real files (other bytes, far fewer rows), so both changes are
accepted explicitly, and the results say so."""

from __future__ import annotations

import json
from pathlib import Path

from services.store.objects import LocalObjectStore
from tests.support.source_fixtures.brodatz import write_brodatz
from tests.support.source_fixtures.coil100 import write_coil100
from tests.support.source_fixtures.lfw import write_lfw
from workers.ingest.readers.convert import CONVERTED, convert_sources
from workers.stream.manifest import parse_manifest
from workers.stream.prepare import prepare_stream

KEYS = ("coil100", "lfw", "brodatz")


def _short_tasks(keys: tuple[str, ...]) -> dict:
    doc = json.loads((Path(__file__).resolve().parents[3] / "workers/stream/manifests/nevis22-short.json").read_text())
    tasks = [t for t in doc["tasks"] if t["dataset"].removeprefix("nevis:") in keys]
    return {**doc, "name": "short-subset", "tasks": [{**t, "order": i + 1} for i, t in enumerate(tasks)]}


def test_converted_fixtures_prepare_with_their_short_stream_rules(tmp_path: Path) -> None:
    data, offline = tmp_path / "data", tmp_path / "offline"
    write_coil100(data)
    write_lfw(data)
    write_brodatz(data)
    outcomes = convert_sources(KEYS, data, offline, accept_count_change=True, accept_checksum_change=True)
    assert [o.status for o in outcomes] == [CONVERTED] * 3, outcomes
    assert all("mismatch accepted by --accept-checksum-change" in o.detail for o in outcomes)
    assert (
        "classes: expected 423, found" in outcomes[1].detail
        and "accepted by --accept-count-change" in outcomes[1].detail
    )
    manifest = parse_manifest(_short_tasks(KEYS))
    report = prepare_stream(
        manifest, LocalObjectStore(tmp_path / "store"), image_size=16, offline_dir=offline, accept_count_change=True
    )
    notes = {item.dataset: item.notes for item in report.datasets}
    assert any("accepted (--accept-count-change)" in n for n in notes["nevis:lfw"]), notes
    counts = {item.dataset: item.counts for item in report.datasets}
    assert counts["nevis:coil100"]["train"] == 5 + 5 + 1  # obj1, obj100 at bins 70, 71, 0, 1, 2; obj2 at bin 2
    assert counts["nevis:lfw"] == {"train": 6 + 5 + 7 - 12, "dev": 3, "dev_test": 3, "test": 6}
    assert sum(counts["nevis:brodatz"].values()) == 9 * 111
