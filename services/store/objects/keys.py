"""Object-store keys: relative, ``/``-separated paths that are safe on every backend.

A key that passes :func:`validate_key` maps to the same object on a local folder and on
S3, cannot escape the store's root, and fits S3's 1024-byte limit and a file system's
255-byte name limit. Everything that takes a key checks it here first, so a bad key fails
before anything is read or written.
"""

from __future__ import annotations

from services.core.errors import InvalidKeyError

# S3 refuses keys longer than 1024 bytes of UTF-8.
MAX_KEY_BYTES = 1024
# Local file systems cap one name at 255 bytes; the local backend adds a short suffix.
MAX_SEGMENT_BYTES = 250


def validate_key(key: str) -> str:
    """Check that ``key`` is a safe relative object key and return it unchanged.

    Args:
        key: A ``/``-separated relative path such as ``"shards/mini/digits/train-0000.npz"``.

    Returns:
        The key itself, so calls can be chained.

    Raises:
        InvalidKeyError: naming the key and the rule it breaks.
    """
    if not isinstance(key, str):
        raise InvalidKeyError(f"Invalid object key {key!r}: a key must be a str; got {type(key).__name__}.")
    if not key:
        raise InvalidKeyError("Invalid object key '': a key must not be empty.")
    _check_text(key)
    if key.startswith("/"):
        raise InvalidKeyError(f"Invalid object key {key!r}: a key must be a relative path, not start with '/'.")
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"Invalid object key {key[:60]!r}...: a key must be at most {MAX_KEY_BYTES} bytes "
            f"of UTF-8 (S3's limit); got {size}."
        )
    for segment in key.split("/"):
        _check_segment(key, segment)
    return key


def validate_prefix(prefix: str) -> str:
    """Check a :meth:`list` prefix and return it in canonical form.

    A prefix names a folder of keys: ``""`` (everything) or a valid key with or without a
    trailing ``/``. It always ends at a segment, so ``"shards/mini"`` never matches
    ``"shards/minimal/x"``.

    Returns:
        ``""`` or the prefix with exactly one trailing ``/``, e.g. ``"shards/mini/"``.

    Raises:
        InvalidKeyError: naming the prefix and the rule it breaks.
    """
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise InvalidKeyError(f"Invalid key prefix {prefix!r}: a prefix must be a str; got {type(prefix).__name__}.")
    if prefix.startswith("/"):
        raise InvalidKeyError(
            f"Invalid key prefix {prefix!r}: a prefix must be a relative path, not start "
            "with '/'; use '' for every key."
        )
    body = prefix[:-1] if prefix.endswith("/") else prefix
    try:
        validate_key(body)
    except InvalidKeyError as exc:
        reason = str(exc).split(": ", 1)[-1]
        raise InvalidKeyError(f"Invalid key prefix {prefix!r}: {reason}") from None
    return body + "/"


def _check_text(key: str) -> None:
    """Refuse characters that are unsafe in file names or invisible in messages."""
    if "\\" in key:
        raise InvalidKeyError(f"Invalid object key {key!r}: use '/' to separate segments, not '\\'.")
    for char in key:
        if ord(char) < 32 or ord(char) == 127:
            raise InvalidKeyError(
                f"Invalid object key {key!r}: control characters (such as NUL, tab or "
                f"newline) are not allowed; found {char!r}."
            )


def _check_segment(key: str, segment: str) -> None:
    """Refuse path segments that are empty, relative-path markers or too long."""
    if segment == "":
        raise InvalidKeyError(
            f"Invalid object key {key!r}: empty segments ('a//b', a leading or trailing '/') are not allowed."
        )
    if segment in (".", ".."):
        raise InvalidKeyError(f"Invalid object key {key!r}: '.' and '..' segments are not allowed.")
    size = len(segment.encode("utf-8"))
    if size > MAX_SEGMENT_BYTES:
        raise InvalidKeyError(
            f"Invalid object key {key[:60]!r}: each segment must be at most "
            f"{MAX_SEGMENT_BYTES} bytes of UTF-8 (a file-name limit); got {size}."
        )


__all__ = ["MAX_KEY_BYTES", "MAX_SEGMENT_BYTES", "validate_key", "validate_prefix"]
