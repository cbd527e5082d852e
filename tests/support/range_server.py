"""A loopback HTTP server for fetch tests: serves given bytes, honours ``Range``, and can
cut its first answer for a path short (a dropped connection) or ignore ranges."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-$")


class RangeServer:
    """``files`` maps a URL path (``/origin/a.bin``) to its bytes; ``requests`` records
    ``(path, Range header or None)`` of every GET, in order."""

    def __init__(self, files: dict[str, bytes], *, cut_first: frozenset[str] = frozenset()) -> None:
        self.files = dict(files)
        self.cut_first = set(cut_first)
        self.requests: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def gets(self, path: str) -> list[str | None]:
        """The Range headers of the GETs of ``path``."""
        return [r for p, r in self.requests if p == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                return None

            def do_GET(self) -> None:
                path, wanted = self.path, self.headers.get("Range")
                with server._lock:
                    server.requests.append((path, wanted))
                    cut = path in server.cut_first
                    server.cut_first.discard(path)
                data = server.files.get(path)
                if data is None:
                    self.send_error(404)
                    return
                match = _RANGE.match(wanted or "")
                start = int(match.group(1)) if match else 0
                if start >= len(data) and match:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.end_headers()
                    return
                self.send_response(206 if match else 200)
                if match:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if cut:  # half the body, then a dropped connection
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        return Handler

    @contextmanager
    def running(self) -> Iterator[RangeServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


__all__ = ["RangeServer"]
