"""Two workers preparing the same stream at once (two submissions' first tasks launched
together): one prepares, the other waits and finds everything present; nothing is rebuilt."""

from __future__ import annotations

import threading

from services.store.objects import LocalObjectStore
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream


def test_concurrent_preparers_of_one_store_take_turns(tmp_path, tiny_stream):
    manifest = load_stream(tiny_stream)
    reports, errors = [], []

    def prepare() -> None:
        try:
            store = LocalObjectStore(tmp_path / "store")  # each worker opens the store itself
            reports.append(prepare_stream(manifest, store, image_size=16, offline_dir=None))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    statuses = sorted(tuple(sorted({d.status for d in r.datasets})) for r in reports)
    assert statuses == [("prepared",), ("present",)]
