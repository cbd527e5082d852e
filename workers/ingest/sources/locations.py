"""Where a source's file lives: in the local data folder, and in a mirror.

Both use one layout, ``<root>/<source key>/<file name>``, so a mirror is just a copy of a
data folder, and ``nevis data mirror`` fills one from a folder that ``fetch`` filled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from services.core.errors import ConfigError
from workers.stream.sources.catalogue import Source, SourceFile

MIRROR_SCHEMES = ("http", "https", "s3")
SOURCES_FOLDER = "sources"


def sources_dir(data_dir: Path) -> Path:
    """The folder fetched files go to: ``<NEVIS_DATA_DIR>/sources``."""
    return data_dir / SOURCES_FOLDER


def local_path(dest: Path, source: Source, file: SourceFile) -> Path:
    return dest / source.key / file.name


def relative_name(source: Source, file: SourceFile) -> str:
    return f"{source.key}/{file.name}"


def check_mirror(url: str, *, setting: str = "NEVIS_DATA_MIRROR") -> str:
    """``url`` without a trailing slash, if it is an http(s):// or s3:// prefix.

    Raises:
        ConfigError: another scheme, or an s3:// URL without a bucket.
    """
    parts = urlsplit(url)
    if parts.scheme not in MIRROR_SCHEMES or not parts.netloc:
        raise ConfigError(f"{setting} must be an http://, https:// or s3://bucket/prefix URL; got {url!r}")
    return url.rstrip("/")


def mirror_url(mirror: str, source: Source, file: SourceFile) -> str:
    """The URL of a file in a mirror (``<mirror>/<source key>/<file name>``)."""
    return f"{mirror.rstrip('/')}/{quote(source.key)}/{quote(file.name)}"


def split_s3(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ``("bucket", "some/prefix")``."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ConfigError(f"expected an s3://bucket/prefix URL; got {url!r}")
    return parts.netloc, parts.path.strip("/")


def s3_client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client from the usual AWS settings; ``endpoint_url`` for S3-compatible servers."""
    import boto3  # noqa: PLC0415 (only fetches that touch S3 pay for boto3)
    from botocore.config import Config  # noqa: PLC0415

    style = "path" if endpoint_url else "auto"
    config = Config(s3={"addressing_style": style}, retries={"mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint_url, config=config)


__all__ = ["check_mirror", "local_path", "mirror_url", "relative_name", "s3_client", "sources_dir", "split_s3"]
