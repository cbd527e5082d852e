"""A data mirror of the SHORT stream made from the fixture writers, served over loopback HTTP.

:func:`write_fixture_mirror` writes every SHORT source's fixture files as a mirror lays them
out (``<root>/sources/<key>/<file>``, the data folder's layout) and a source catalogue that
holds each of them to its own sha256 (``NEVIS_SOURCE_CATALOGUE``): the fixtures are not the
origins' bytes, so the packaged checksums would refuse them. :func:`serve_folder` serves a
folder with the standard library's static file server, as any HTTP mirror would
(``NEVIS_DATA_MIRROR``). Used by tests/integration/test_short_stream_mirror.py and by
bench/short_stream_from_mirror.py.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

from tests.support.source_fixtures.short_stream import write_short_sources
from workers.ingest.sources.locations import sources_dir


@dataclass(frozen=True)
class FixtureMirror:
    """A written mirror: its folder (``<root>/sources``), its catalogue and its sources."""

    folder: Path
    catalogue: Path
    keys: tuple[str, ...]

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(sorted(p for p in self.folder.rglob("*") if p.is_file()))

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.files)


def write_fixture_mirror(root: Path) -> FixtureMirror:
    """Every SHORT source's fixture files under ``root/sources`` and, in
    ``root/catalogue.json``, the packaged catalogue with those files' sha256 and sizes.

    Raises:
        AssertionError: a fixture writer left out a file the catalogue lists.
    """
    keys = write_short_sources(root)
    folder = sources_dir(root)
    doc = json.loads(resources.files("workers.stream.sources").joinpath("catalogue.json").read_text("utf-8"))
    for entry in doc["sources"]:
        if entry["key"] not in keys:
            continue
        for file in entry["files"]:
            path = folder / entry["key"] / file["name"]
            assert path.is_file(), f"the {entry['key']} fixture writes no {file['name']}"
            data = path.read_bytes()
            file["checksum"] = "sha256:" + hashlib.sha256(data).hexdigest()
            file["size"] = len(data)
    catalogue = root / "catalogue.json"
    catalogue.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return FixtureMirror(folder=folder, catalogue=catalogue, keys=tuple(keys))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # keep test and script output quiet
        return None


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on a loopback port for the duration; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["FixtureMirror", "serve_folder", "write_fixture_mirror"]
