"""Build the configured object store from its URL (``NEVIS_STORE_URL``).

``file:///absolute/path`` gives a :class:`LocalObjectStore`; ``s3://bucket/prefix`` gives an
:class:`S3ObjectStore` (``NEVIS_S3_ENDPOINT_URL`` for S3-compatible servers). Anything else
is a ConfigError that names the variable. Opening a store touches neither disk nor network.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from services.core.errors import ConfigError, InvalidKeyError
from services.store.objects.base import ObjectStore
from services.store.objects.keys import validate_prefix
from services.store.objects.local import LocalObjectStore

if TYPE_CHECKING:
    from services.core.config import Settings

_EXPECTED = "NEVIS_STORE_URL must be file:///absolute/path or s3://bucket/prefix"


def open_store(url: str, *, s3_endpoint_url: str | None = None) -> ObjectStore:
    """Open the object store named by ``url``.

    Args:
        url: ``file:///absolute/path`` or ``s3://bucket/prefix`` (prefix optional).
        s3_endpoint_url: An S3-compatible server for ``s3://`` URLs; default AWS.

    Raises:
        ConfigError: if the URL is malformed or names an unsupported scheme.
    """
    parts = urlsplit(url or "")
    if parts.query or parts.fragment:
        raise ConfigError(f"Unsupported object-store URL {url!r}: {_EXPECTED}, without ?query or #fragment.")
    if parts.scheme == "file":
        return _open_local(url, parts.netloc, unquote(parts.path))
    if parts.scheme == "s3":
        return _open_s3(url, parts.netloc, unquote(parts.path), s3_endpoint_url)
    raise ConfigError(f"Unsupported object-store URL {url!r}: {_EXPECTED}.")


def store_from_settings(settings: Settings) -> ObjectStore:
    """Open the store that ``settings.store_url`` (and its S3 endpoint) names."""
    return open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)


def _open_local(url: str, host: str, path: str) -> LocalObjectStore:
    if host not in ("", "localhost") or not path.startswith("/"):
        raise ConfigError(
            f"Unsupported object-store URL {url!r}: a local store needs an absolute path "
            "with three slashes, e.g. file:///var/lib/nevis/store (NEVIS_STORE_URL)."
        )
    return LocalObjectStore(Path(path))


def _open_s3(url: str, bucket: str, path: str, endpoint_url: str | None) -> ObjectStore:
    from services.store.objects.s3 import S3ObjectStore  # noqa: PLC0415 - boto3 loads only when needed

    if not bucket or "@" in bucket or ":" in bucket:
        raise ConfigError(
            f"Unsupported object-store URL {url!r}: {_EXPECTED}, with a bucket name and no "
            "credentials or port (set the endpoint with NEVIS_S3_ENDPOINT_URL)."
        )
    prefix = path.strip("/")
    try:
        validate_prefix(prefix)
    except InvalidKeyError as exc:
        raise ConfigError(f"Invalid S3 prefix in NEVIS_STORE_URL {url!r}: {exc}") from None
    return S3ObjectStore(bucket, prefix, endpoint_url=endpoint_url)


__all__ = ["open_store", "store_from_settings"]
