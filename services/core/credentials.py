"""Which variables are credentials, and how a worker harness reads them from a path.

A remote worker harness (a Ray job's driver, a KubeRay head) must reach the database and the
object store, but a job's runtime environment is cluster metadata: anyone who can ask the
cluster reads it. So remote backends send no credential; they send ``NEVIS_SECRETS_PATH``,
the path on the harness's node of a file (``NAME=value`` lines) or a folder (one file per
name, the way Kubernetes mounts a Secret), and the harness loads it before it reads its
settings. Learner processes never see the path's contents: their sandboxes do not mount it.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from services.core.errors import ConfigError

# Storage and database credentials, and where they lead: learner processes never get these.
CREDENTIAL_VARS = (
    "NEVIS_DATABASE_URL",
    "NEVIS_STORE_URL",
    "NEVIS_S3_ENDPOINT_URL",
    "NEVIS_DATA_DIR",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "PGPASSWORD",
    "PGPASSFILE",
    "NEVIS_SPLIT_SALT",  # the deployment's split salt (docs/isolation.md): a secret like the others
)
# What a secrets path may also set: harmless settings that belong with the credentials.
SECRETS_PATH_EXTRAS = ("AWS_DEFAULT_REGION", "NEVIS_OFFLINE_DATA_DIR")
SECRETS_PATH_VAR = "NEVIS_SECRETS_PATH"
_MAX_VALUE_BYTES = 64 * 1024


def read_secrets_path(path: str | Path) -> dict[str, str]:
    """The variables a secrets file or folder sets.

    Raises:
        ConfigError: the path is missing or unreadable, a line is not ``NAME=value``, or a
            name is not one a secrets path may set (so a typo is not silently ignored).
    """
    source = Path(path)
    if source.is_dir():
        pairs = [
            (entry.name, _read(entry))
            for entry in sorted(source.iterdir())
            if entry.is_file() and not entry.name.startswith(".")
        ]
    elif source.is_file():
        pairs = _parse_lines(_read(source), source)
    else:
        raise ConfigError(
            f"{SECRETS_PATH_VAR}={str(source)!r}: no such file or folder on this "
            "node (it must hold the worker's NEVIS_DATABASE_URL and store settings)."
        )
    allowed = set(CREDENTIAL_VARS) | set(SECRETS_PATH_EXTRAS)
    unknown = sorted(name for name, _ in pairs if name not in allowed)
    if unknown:
        raise ConfigError(
            f"{SECRETS_PATH_VAR}={str(source)!r} sets {', '.join(unknown)}; a secrets "
            f"path may set only: {', '.join(sorted(allowed))}."
        )
    return {name: value.strip() for name, value in pairs}


def load_secrets_path(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """If ``NEVIS_SECRETS_PATH`` is set, put what it holds into ``environ`` (default: this
    process's environment); returns the names set."""
    environ = os.environ if environ is None else environ
    path = environ.get(SECRETS_PATH_VAR)
    if not path:
        return []
    values = read_secrets_path(path)
    environ.update(values)
    return sorted(values)


def _read(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_VALUE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{SECRETS_PATH_VAR}: cannot read {path}: {exc.strerror}") from None
    if len(data) > _MAX_VALUE_BYTES:
        raise ConfigError(f"{SECRETS_PATH_VAR}: {path} is larger than {_MAX_VALUE_BYTES} bytes.")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{SECRETS_PATH_VAR}: {path} is not UTF-8 text.") from None


def _parse_lines(text: str, source: Path) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{SECRETS_PATH_VAR}: {source} line {number} is not NAME=value.")
        pairs.append((name.strip(), value.strip().strip("'\"")))
    return pairs


__all__ = ["CREDENTIAL_VARS", "SECRETS_PATH_EXTRAS", "SECRETS_PATH_VAR", "load_secrets_path", "read_secrets_path"]
