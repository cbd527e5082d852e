"""API tokens: how they are made, stored and checked.

A token is ``nvs_`` plus 32 random bytes (URL-safe base64). Only its sha256 is stored; the
first characters after the prefix are kept as a display prefix so an operator can tell
tokens apart. A random 256-bit secret cannot be guessed, so a fast hash is enough (no KDF),
and lookups by hash go through a unique index.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

TOKEN_PREFIX = "nvs_"
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


__all__ = [
    "TOKEN_PREFIX", "NewToken", "display_prefix", "hash_token", "looks_like_token", "new_token",
]
