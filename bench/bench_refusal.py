"""How fast hostile input is refused: figures for issue 13's "cheap refusal first".

Starts the coordinator (SQLite in a temporary folder) under a real uvicorn server and times:
a 150 MB JSON body without a token, a 49 MB upload without a token (only a few KB of each is
ever sent: the rest must not be needed), and the archive checks on a 300,000-member tar.gz and
a tar whose one member declares 16 GiB. Timing belongs here, not in the tests, which check
the behaviour (status codes, what was read) instead.

Usage: ``python bench/bench_refusal.py``; it takes seconds.
"""

from __future__ import annotations

import gzip
import io
import socket
import tarfile
import tempfile
import threading
import time
from pathlib import Path


def _status(sock: socket.socket) -> str:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def _timed_request(port: int, head: bytes, body_start: bytes) -> tuple[str, float]:
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        sock.sendall(head + b"\r\n" + body_start)
        status = _status(sock)
    return status, time.perf_counter() - started


def _serve(folder: Path) -> tuple[object, int]:
    import uvicorn

    from services.coordinator.app import create_app
    from services.coordinator.common.config import CoordinatorSettings
    from services.store.db import upgrade

    settings = CoordinatorSettings(data_dir=folder, database_url=f"sqlite:///{folder}/nevis.sqlite")
    upgrade(settings.database_url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, port


def _many_members(path: Path, count: int) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for i in range(count):
            archive.addfile(tarfile.TarInfo(f"m/{i}.py"), io.BytesIO(b""))


def _huge_member(path: Path) -> None:
    """A tar.gz whose single member's header declares 16 GiB (its data is never written)."""
    info = tarfile.TarInfo("learner.py")
    info.size = 16 * 1024**3
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024))


def main() -> None:
    from services.core.errors import NevisError
    from workers.sandbox.bundles import check_bundle

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        server, port = _serve(folder)
        try:
            json_head = (
                b"POST /v1/submissions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                b"Content-Length: 157286400\r\n"
            )
            status, seconds = _timed_request(port, json_head, b'{"learner_id": ' + b" " * 4096)
            print(f"150 MB JSON body, no token      : {status:<28} {seconds * 1000:8.1f} ms (4 KB sent)")
            upload_head = (
                b"POST /v1/learners/bundle HTTP/1.1\r\nHost: bench\r\n"
                b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 51380224\r\n"
            )
            status, seconds = _timed_request(port, upload_head, b"--xyz\r\n" + b"\0" * 4096)
            print(f"49 MB upload, no token          : {status:<28} {seconds * 1000:8.1f} ms (4 KB sent)")
        finally:
            server.should_exit = True
        for name, build in (
            ("300k-member tar.gz", lambda p: _many_members(p, 300_000)),
            ("one 16 GiB member (tar.gz)", _huge_member),
        ):
            path = folder / ("many.tar.gz" if "300k" in name else "huge.tar.gz")
            build(path)
            started = time.perf_counter()
            try:
                check_bundle(path, filename=path.name, max_unpacked_bytes=1024**3)
                outcome = "ACCEPTED (wrong)"
            except NevisError as exc:
                outcome = f"refused: {str(exc)[:60]}"
            seconds = time.perf_counter() - started
            print(f"{name:<32}: {seconds * 1000:8.1f} ms  {outcome} ({path.stat().st_size / 1e6:.1f} MB on disk)")


if __name__ == "__main__":
    main()
