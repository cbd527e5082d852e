"""API tokens: how they are made, stored and checked.

A token is ``nvs_`` plus 32 random bytes (URL-safe base64). Only its sha256 is stored; the
first characters after the prefix are kept as a display prefix so an operator can tell
tokens apart. A random 256-bit secret cannot be guessed, so a fast hash is enough (no KDF),
and lookups by hash go through a unique index.

An ``Authorization`` header has one canonical reading (:func:`bearer_secret`), shared by
authentication and the write rate limit, so that spellings of one token cannot pass for
different callers.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

TOKEN_PREFIX = "nvs_"  # noqa: S105 - a public marker of our tokens, not a secret
TOKEN_MAX_DAYS = 366
"""The longest lifetime a token may be given, in days (API, CLI and settings alike)."""
_DISPLAY_CHARS = 8


@dataclass(frozen=True)
class NewToken:
    """A freshly made token: ``secret`` is shown to its owner once and never stored."""

    secret: str
    sha256: str
    prefix: str


def new_token() -> NewToken:
    """A new random token with its hash and display prefix."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return NewToken(secret=secret, sha256=hash_token(secret), prefix=display_prefix(secret))


def hash_token(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def display_prefix(secret: str) -> str:
    """The part of a token that may be shown in listings (``nvs_`` + 8 characters)."""
    return secret[: len(TOKEN_PREFIX) + _DISPLAY_CHARS]


def looks_like_token(value: str) -> bool:
    """Cheap shape check before touching the database."""
    return value.startswith(TOKEN_PREFIX) and 20 <= len(value) <= 200 and value.isascii()


def bearer_secret(header: str | None) -> str | None:
    """The secret of an ``Authorization: Bearer <secret>`` header, or ``None``.

    The scheme is case-insensitive and any run of whitespace (spaces, tabs) around or between
    the two parts is tolerated, so ``bearer x`` and ``BEARER  x`` both read as ``x``; anything
    but exactly a scheme and one credential (another scheme, a secret with a space in it)
    reads as no token.
    """
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


__all__ = [
    "TOKEN_MAX_DAYS",
    "TOKEN_PREFIX",
    "NewToken",
    "bearer_secret",
    "display_prefix",
    "hash_token",
    "looks_like_token",
    "new_token",
]
