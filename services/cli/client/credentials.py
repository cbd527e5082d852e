"""Where ``nevis login`` keeps the service's URL and token: a file only its user may read.

The file is ``$XDG_CONFIG_HOME/nevis/credentials.json`` (``~/.config/nevis/`` without
``XDG_CONFIG_HOME``), written with mode 0600 in a 0700 folder, because the token is a bearer
secret. ``NEVIS_URL`` and ``NEVIS_TOKEN`` override what is stored, so CI jobs and notebooks
need no file at all.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import ConfigError

URL_ENV, TOKEN_ENV = "NEVIS_URL", "NEVIS_TOKEN"


@dataclass(frozen=True)
class Credentials:
    """A service's base URL and the bearer token used there (``None``: anonymous)."""

    url: str
    token: str | None = None


def config_dir() -> Path:
    """The user's nevis configuration folder (XDG base directory rules)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nevis"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


def normalise_url(url: str) -> str:
    """``url`` without trailing slashes; refused unless it is http(s)."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"The service URL must start with http:// or https://; got {url!r}.")
    return url


def save_credentials(creds: Credentials) -> Path:
    """Write ``creds`` (mode 0600, the folder 0700, replaced atomically); returns the file."""
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = credentials_path()
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": creds.url, "token": creds.token}, handle)
    os.replace(partial, path)
    return path


def load_credentials() -> Credentials:
    """The stored credentials with ``NEVIS_URL`` / ``NEVIS_TOKEN`` on top.

    Raises:
        ConfigError: no URL anywhere (never logged in and no ``NEVIS_URL``), or an unreadable file.
    """
    stored: dict[str, str | None] = {}
    path = credentials_path()
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path} is not readable credentials ({exc}); run `nevis login URL` again.") from None
    url = os.environ.get(URL_ENV) or stored.get("url")
    if not url:
        raise ConfigError(f"No service to talk to: run `nevis login URL` first, or set {URL_ENV}.")
    token = os.environ.get(TOKEN_ENV) or stored.get("token")
    return Credentials(url=normalise_url(str(url)), token=str(token) if token else None)


__all__ = [
    "TOKEN_ENV",
    "URL_ENV",
    "Credentials",
    "config_dir",
    "credentials_path",
    "load_credentials",
    "normalise_url",
    "save_credentials",
]
