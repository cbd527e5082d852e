"""Copy one URL (http, https or s3) into a ``.part`` file, resuming with byte ranges.

A connection that drops mid-file is retried from where the ``.part`` file ends (HTTP
``Range`` / S3 ``Range``), so a 40 GB archive is not started over; a server that ignores the
range answers 200 and the copy starts over from byte 0.
"""

from __future__ import annotations

import http.client
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

CHUNK = 1 << 20
USER_AGENT = "nevis-data-fetch/1"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")
_SHARE_HOSTS = re.compile(r"google\.com$|sharepoint\.com$")  # file shares that answer with HTML pages


class TransferError(Exception):
    """A URL could not be copied; the message says why (shown in the closing table).

    ``transient``: worth another attempt (no connection, a 5xx, a timeout), unlike a 404.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass
class Response:
    """An open download: its body, the offset it starts at and the file's total size."""

    body: IO[bytes]
    start: int
    total: int | None
    content_type: str = ""


def _open_http(url: str, start: int, timeout: float) -> Response:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})  # noqa: S310
    if start:
        request.add_header("Range", f"bytes={start}-")
    try:
        reply = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http/https only)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # nothing left past ``start``: the part is complete
            return Response(body=_Empty(), start=start, total=start)
        raise TransferError(f"HTTP {exc.code} {exc.reason} from {url}", transient=exc.code >= 500) from None
    except (urllib.error.URLError, OSError) as exc:
        raise TransferError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}", transient=True) from None
    kind = reply.headers.get("Content-Type", "")
    length = reply.headers.get("Content-Length")
    if reply.status == 206:
        match = _CONTENT_RANGE.match(reply.headers.get("Content-Range", ""))
        offset = int(match.group(1)) if match else start
        total = int(match.group(2)) if match and match.group(2) != "*" else None
        return Response(reply, offset, total, kind)
    return Response(reply, 0, int(length) if length else None, kind)


def _open_s3(url: str, start: int, client: Any) -> Response:
    parts = urlsplit(url)
    extra = {"Range": f"bytes={start}-"} if start else {}
    try:
        reply = client.get_object(Bucket=parts.netloc, Key=parts.path.lstrip("/"), **extra)
    except Exception as exc:  # botocore's ClientError and connection errors alike  # noqa: BLE001
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
        if code == "InvalidRange" and start:
            return Response(body=_Empty(), start=start, total=start)
        raise TransferError(f"S3 {code} for {url}") from None
    match = _CONTENT_RANGE.match(reply.get("ContentRange", "") or "")
    if match:
        total = int(match.group(2)) if match.group(2) != "*" else None
        return Response(reply["Body"], int(match.group(1)), total)
    return Response(reply["Body"], 0, reply.get("ContentLength"))


class _Empty:
    def read(self, _n: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        return None


def open_range(url: str, start: int, *, timeout: float = 60.0, s3_client: Any = None) -> Response:
    """Open ``url`` from byte ``start`` (0: the whole file)."""
    scheme = urlsplit(url).scheme
    if scheme in ("http", "https"):
        return _open_http(url, start, timeout)
    if scheme == "s3":
        if s3_client is None:
            raise TransferError(f"no S3 client for {url}")
        return _open_s3(url, start, s3_client)
    raise TransferError(f"unsupported URL scheme {scheme!r} in {url}")


def download(
    url: str,
    part: Path,
    *,
    on_total: Callable[[int | None, int], None] = lambda total, done: None,
    on_bytes: Callable[[int], None] = lambda n: None,
    attempts: int = 4,
    timeout: float = 60.0,
    s3_client: Any = None,
) -> None:
    """Copy ``url`` into ``part``, continuing what ``part`` already holds.

    Args:
        on_total: called on each (re)connection with the file's size (if known) and the
            bytes already on disk.
        on_bytes: called with the size of each chunk written.
        attempts: connections tried in all; each after the first resumes.

    Raises:
        TransferError: the last attempt's failure, or an HTML page where a file was expected.
    """
    part.parent.mkdir(parents=True, exist_ok=True)
    reason = "no attempt made"
    for attempt in range(attempts):
        if attempt and reason.startswith(("cannot reach", "HTTP")):
            time.sleep(min(2.0**attempt, 30.0))  # a server that refused us gets a moment
        have = part.stat().st_size if part.exists() else 0
        try:
            response = open_range(url, have, timeout=timeout, s3_client=s3_client)
        except TransferError as exc:
            if not exc.transient:
                raise
            reason = str(exc)
            continue
        if response.content_type.startswith("text/html") and _SHARE_HOSTS.search(urlsplit(url).netloc):
            response.body.close()
            raise TransferError(f"{url} answered with an HTML page (a confirmation or sign-in page), not the file")
        if response.start != have:  # the server sent the whole file again
            part.write_bytes(b"")
            have = 0
        on_total(response.total, have)
        try:
            with part.open("ab") as out:
                while chunk := response.body.read(CHUNK):
                    out.write(chunk)
                    on_bytes(len(chunk))
        except (http.client.IncompleteRead, ConnectionError, TimeoutError, OSError) as exc:
            reason = f"connection dropped after {part.stat().st_size} bytes ({type(exc).__name__})"
            continue
        finally:
            response.body.close()
        size = part.stat().st_size
        if response.total is None or size == response.total:
            return
        if size > response.total:
            raise TransferError(f"{url}: got {size} bytes, more than the {response.total} announced")
        reason = f"connection closed after {size} of {response.total} bytes"
    raise TransferError(
        f"{reason} ({attempts} attempts)"
        if reason.startswith(("cannot reach", "HTTP"))
        else f"{url}: {reason} ({attempts} attempts)"
    )


__all__ = ["Response", "TransferError", "download", "open_range"]
