"""An S3 object store (AWS or any S3-compatible server) through boto3.

Guarantees, on top of S3's own (an object becomes visible only once its upload, multipart
included, has completed, so writes are atomic):

- every object carries its full-content sha256 in user metadata (``x-amz-meta-sha256``),
  computed before the upload starts; every read re-hashes the bytes and compares, so a
  tampered or foreign object raises :class:`~services.core.errors.DataIntegrityError`;
- uploads also send S3's own SHA-256 checksum (``ChecksumSHA256``, per part for multipart
  uploads) so the server refuses bytes damaged in transit; pass ``server_checksums=False``
  for servers that reject checksum headers;
- :meth:`S3ObjectStore.get_file` downloads to a temporary file beside the target, verifies
  it and only then renames it into place.

Errors are mapped to the project's: a missing key is ObjectNotFoundError, a missing bucket,
refused credentials or an unreachable endpoint is a ConfigError naming the setting to fix.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from services.core.errors import ConfigError, DataIntegrityError, NevisError, ObjectNotFoundError, ObjectTooLargeError
from services.store.objects.atomic import read_chunks, staged_file
from services.store.objects.base import ListedObject, ObjectInfo
from services.store.objects.keys import validate_key, validate_prefix
from services.store.objects.s3_errors import NOT_FOUND_CODES, error_code, translate_s3_errors

METADATA_KEY = "sha256"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# get_file retries when the object is replaced while it downloads.
_DOWNLOAD_ATTEMPTS = 3


class _ChangedDuringDownload(Exception):
    """The object was overwritten between reading its metadata and its bytes."""


class S3ObjectStore:
    """An :class:`~services.store.objects.base.ObjectStore` in an S3 bucket.

    Args:
        bucket: The bucket; it must exist already.
        prefix: Folder inside the bucket that holds this store's keys (``""``: the root).
        endpoint_url: An S3-compatible server (``NEVIS_S3_ENDPOINT_URL``); default AWS.
        client: A ready boto3 S3 client; default one built from the usual AWS settings.
        transfer_config: Multipart thresholds and concurrency for files.
        server_checksums: Also send S3's own SHA-256 upload checksums.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        client: Any = None,
        transfer_config: TransferConfig | None = None,
        server_checksums: bool = True,
    ) -> None:
        if not bucket or "/" in bucket:
            raise ConfigError(f"Invalid S3 bucket name {bucket!r}; set NEVIS_STORE_URL to s3://BUCKET/PREFIX.")
        self.bucket = bucket
        self.prefix = validate_prefix(prefix)
        self.url = f"s3://{bucket}/{self.prefix.rstrip('/')}"
        self.endpoint_url = endpoint_url
        self._own_client = client is None
        self._client = client if client is not None else _new_client(endpoint_url)
        self._transfer = transfer_config or TransferConfig()
        self._server_checksums = server_checksums
        self._bucket_seen = False

    def __repr__(self) -> str:
        return f"S3ObjectStore(url={self.url!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Ray ships stores to workers; a boto3 client cannot be pickled, so rebuild ours.
        if not self._own_client:
            raise TypeError(
                "An S3ObjectStore built with client=... cannot be pickled; build it with "
                "endpoint_url=... instead so each process can make its own client."
            )
        state = dict(self.__dict__)
        del state["_client"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = _new_client(self.endpoint_url)

    # -- writes ------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store ``data`` under ``key`` in one PUT (visible only once complete)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"The 'data' parameter of put_bytes must be bytes; got {type(data).__name__}.")
        data = bytes(data)
        digest = hashlib.sha256(data)
        args: dict[str, Any] = {"Metadata": {METADATA_KEY: digest.hexdigest()}}
        if self._server_checksums:
            args["ChecksumAlgorithm"] = "SHA256"
            args["ChecksumSHA256"] = base64.b64encode(digest.digest()).decode("ascii")
        with self._errors(key):
            self._client.put_object(Bucket=self.bucket, Key=self._s3_key(key), Body=data, **args)
        return ObjectInfo(key=key, size=len(data), sha256=digest.hexdigest())

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Store a local file under ``key``; large files go up as a multipart upload."""
        s3_key = self._s3_key(key)
        # The sha256 must be known before the upload starts: it travels as metadata.
        try:
            with open(path, "rb") as source:
                hasher, size = hashlib.sha256(), 0
                for chunk in read_chunks(source):
                    hasher.update(chunk)
                    size += len(chunk)
        except OSError as exc:
            raise DataIntegrityError(
                f"Cannot store {key!r} from {str(path)!r}: the file cannot be read ({exc})."
            ) from None
        extra: dict[str, Any] = {"Metadata": {METADATA_KEY: hasher.hexdigest()}}
        if self._server_checksums:
            extra["ChecksumAlgorithm"] = "SHA256"
        with self._errors(key):
            self._client.upload_file(str(path), self.bucket, s3_key, ExtraArgs=extra, Config=self._transfer)
        return ObjectInfo(key=key, size=size, sha256=hasher.hexdigest())

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> ObjectInfo:
        """Store the concatenated ``chunks``: spooled to a local temp file, then uploaded.

        If iterating ``chunks`` raises, nothing is uploaded and the old object stays.
        """
        self._s3_key(key)
        with tempfile.TemporaryDirectory(prefix="nevis-s3-") as folder:
            spool = Path(folder) / "object"
            with open(spool, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            return self.put_file(key, spool)

    def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self._s3_key(key))

    # -- reads -------------------------------------------------------------------------

    def get_bytes(self, key: str, *, max_bytes: int | None = None) -> bytes:
        """Return the object's bytes after verifying their sha256; an object over
        ``max_bytes`` (the response's length, before its body) raises ObjectTooLargeError unread."""
        with self._errors(key):
            response = self._client.get_object(Bucket=self.bucket, Key=self._s3_key(key))
            length = int(response.get("ContentLength", 0))
            if max_bytes is not None and length > max_bytes:
                response["Body"].close()
                raise ObjectTooLargeError(
                    f"Object {key!r} has {length} bytes, over the {max_bytes}-byte limit of its reader: not read."
                )
            data = response["Body"].read() if max_bytes is None else response["Body"].read(max_bytes + 1)
        info = self._info_from(key, response)
        self._check(info, hashlib.sha256(data).hexdigest(), len(data))
        return data

    def get_file(self, key: str, path: Path) -> ObjectInfo:
        """Download, verify, then rename onto ``path``; a failed check leaves no file."""
        s3_key = self._s3_key(key)
        for _ in range(_DOWNLOAD_ATTEMPTS):
            head = self._head(key)
            info = self._info_from(key, head)
            try:
                with staged_file(Path(path)) as tmp:
                    with self._errors(key):
                        self._client.download_file(self.bucket, s3_key, str(tmp), Config=self._transfer)
                    actual, size = _hash_file(tmp)
                    if actual != info.sha256 and self._head(key)["ETag"] != head["ETag"]:
                        raise _ChangedDuringDownload
                    self._check(info, actual, size)
                return info
            except _ChangedDuringDownload:
                continue
        raise DataIntegrityError(
            f"Object {key!r} in store {self.url} kept changing while it was downloaded "
            f"({_DOWNLOAD_ATTEMPTS} attempts); try again when its writer has finished."
        )

    def info(self, key: str) -> ObjectInfo:
        """Size and recorded sha256 from a HEAD request, without reading the bytes."""
        return self._info_from(key, self._head(key))

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        try:
            self._head(key)
        except ObjectNotFoundError:
            return False
        return True

    def verify(self, key: str) -> ObjectInfo:
        """Stream the object's bytes and check their sha256."""
        with self._errors(key):
            response = self._client.get_object(Bucket=self.bucket, Key=self._s3_key(key))
            info = self._info_from(key, response)
            hasher, size = hashlib.sha256(), 0
            for chunk in response["Body"].iter_chunks(1 << 20):
                hasher.update(chunk)
                size += len(chunk)
        self._check(info, hasher.hexdigest(), size)
        return info

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under the folder ``prefix``, in S3's (UTF-8 byte, i.e. sorted) order.

        Objects whose names are not valid keys (folder markers such as ``a/``, objects
        written by other tools) are skipped.
        """
        full_prefix = self.prefix + validate_prefix(prefix)  # checked now, not on next()
        return (listed.key for listed in self._iter_listed(full_prefix))

    def list_objects(self, prefix: str = "") -> Iterator[ListedObject]:
        """The objects under ``prefix`` with S3's size and ``LastModified``, in key order.

        From the ``list_objects_v2`` pages alone (no HEAD per object); objects whose names
        are not valid keys are skipped, as in :meth:`list`.
        """
        full_prefix = self.prefix + validate_prefix(prefix)  # checked now, not on next()
        return self._iter_listed(full_prefix)

    def _iter_listed(self, full_prefix: str) -> Iterator[ListedObject]:
        paginator = self._client.get_paginator("list_objects_v2")
        with self._errors(None):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full_prefix):
                for item in page.get("Contents", []):
                    key = item["Key"][len(self.prefix) :]
                    if _is_valid_key(key):
                        yield ListedObject(key=key, size=int(item["Size"]), modified=item["LastModified"].timestamp())

    # -- internals ---------------------------------------------------------------------

    def _s3_key(self, key: str) -> str:
        return self.prefix + validate_key(key)

    def _head(self, key: str) -> dict[str, Any]:
        with self._errors(key):
            return self._client.head_object(Bucket=self.bucket, Key=self._s3_key(key))

    def _info_from(self, key: str, response: dict[str, Any]) -> ObjectInfo:
        """Read size and recorded sha256 from a HEAD or GET response."""
        recorded = response.get("Metadata", {}).get(METADATA_KEY, "")
        if not _SHA256_HEX.fullmatch(recorded):
            raise DataIntegrityError(
                f"Object {key!r} in store {self.url} has no recorded sha256 (metadata "
                f"{METADATA_KEY!r} is {recorded!r}); it was not written by this store. "
                "Store it again through the store."
            )
        return ObjectInfo(key=key, size=int(response["ContentLength"]), sha256=recorded)

    def _check(self, info: ObjectInfo, actual: str, size: int) -> None:
        if actual != info.sha256 or size != info.size:
            raise DataIntegrityError(
                f"Object {info.key!r} in store {self.url} is corrupted: expected sha256 "
                f"{info.sha256} ({info.size} bytes), got {actual} ({size} bytes). "
                "Store the object again or restore it from a copy."
            )

    def _bucket_exists(self) -> bool:
        if self._bucket_seen:
            return True
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                return False
            raise
        self._bucket_seen = True
        return True

    def _errors(self, key: str | None) -> AbstractContextManager[None]:
        return translate_s3_errors(url=self.url, bucket=self.bucket, key=key, bucket_exists=self._bucket_exists)


def _new_client(endpoint_url: str | None) -> Any:
    """A boto3 S3 client from the usual AWS settings (environment, profile, IAM role)."""
    # S3-compatible servers usually want path-style URLs (no bucket sub-domains).
    style = "path" if endpoint_url else "auto"
    config = Config(s3={"addressing_style": style}, retries={"mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint_url, config=config)


def _hash_file(path: Path) -> tuple[str, int]:
    hasher, size = hashlib.sha256(), 0
    with open(path, "rb") as stream:
        for chunk in read_chunks(stream):
            hasher.update(chunk)
            size += len(chunk)
    return hasher.hexdigest(), size


def _is_valid_key(key: str) -> bool:
    try:
        validate_key(key)
    except NevisError:
        return False
    return True


__all__ = ["METADATA_KEY", "S3ObjectStore"]
