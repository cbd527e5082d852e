"""Users and their API tokens.

Token hygiene (issue 13): a token minted without an expiry gets a default one; no token
mints one that outlives it; every failed authentication is logged with the token's display
prefix (never its secret). Disabling a user (``users.disabled_at``) revokes every token of it
at once and refuses it new ones, and its requests, until an admin enables it again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import NoReturn

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.coordinator.core import security
from services.coordinator.core.errors import (
    AuthenticationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from services.coordinator.core.validation import DB_INT_MAX, check_name, shown
from services.store.db.models_coordinator import ROLES, ApiToken, User
from services.store.db.types import utcnow

TOKEN_MAX_LIFETIME = timedelta(days=366)
"""The furthest a token's ``expires_at`` may lie ahead."""

log = logging.getLogger("nevis.api.auth")


def create_user(session: Session, *, name: str, role: str, max_concurrent: int | None = None,
                max_per_day: int | None = None) -> User:
    """A new user; a taken name is a ConflictError."""
    check_name(name)
    if role not in ROLES:
        raise InvalidInputError(
            f"The 'role' must be one of {', '.join(ROLES)}. Got {role!r} instead.", field="role")
    for field, value in (("max_concurrent", max_concurrent), ("max_per_day", max_per_day)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= DB_INT_MAX):
            raise InvalidInputError(
                f"The '{field}' must be an int in [0, {DB_INT_MAX}] or null. Got {shown(value)} "
                "instead.", field=field)
    if session.scalar(select(User.id).where(User.name == name)) is not None:
        raise ConflictError(f"A user named {name!r} exists already; pick another name.",
                            field="name")
    user = User(name=name, role=role, max_concurrent=max_concurrent, max_per_day=max_per_day)
    session.add(user)
    session.flush()
    return user


def get_user(session: Session, *, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFoundError(f"No user named {name!r}; create one with `nevis users create`.",
                            field="user")
    return user


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.id)))


def create_token(session: Session, *, user: User, label: str,
                 expires_at: datetime | None = None, default_lifetime: timedelta | None = None,
                 not_after: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret (shown once).

    Args:
        expires_at: when the token stops working; ``None`` takes ``default_lifetime`` from
            now (``None`` too: a token that never expires, for the CLI's admin bootstrap).
        not_after: the expiry of the token that mints this one, which the new token may not
            outlive (a default expiry is cut to it; an explicit later one is refused).

    Raises:
        InvalidInputError: a bad label, or an ``expires_at`` out of range or past ``not_after``.
        ConflictError: ``user`` is disabled.
    """
    if not isinstance(label, str) or not 1 <= len(label) <= 100:
        raise InvalidInputError(
            f"The 'label' must be a string of 1-100 characters. Got {shown(label)} instead.",
            field="label")
    if expires_at is not None:
        check_expiry(expires_at)
        if not_after is not None and expires_at > not_after:
            raise InvalidInputError(
                f"The 'expires_at' ({expires_at.isoformat()}) is later than the expiry of the "
                f"token used to create it ({not_after.isoformat()}); a token cannot outlive "
                "the token that minted it.", field="expires_at")
    elif default_lifetime is not None:
        expires_at = utcnow() + min(default_lifetime, TOKEN_MAX_LIFETIME)
        if not_after is not None:
            expires_at = min(expires_at, not_after)
    elif not_after is not None:
        expires_at = not_after
    if is_disabled(session, user=user):
        raise ConflictError(
            f"User {user.name!r} is disabled and gets no new tokens; an admin enables it with "
            f"POST /v1/users/{user.name}/enable or `nevis users enable {user.name}`.",
            field="user")
    made = security.new_token()
    token = ApiToken(user_id=user.id, label=label, token_prefix=made.prefix,
                     token_sha256=made.sha256, expires_at=expires_at)
    session.add(token)
    session.flush()
    return token, made.secret


def check_expiry(expires_at: datetime, *, field: str = "expires_at") -> datetime:
    """A token's expiry: an aware instant after now and at most :data:`TOKEN_MAX_LIFETIME` ahead."""
    if not isinstance(expires_at, datetime) or expires_at.utcoffset() is None:
        raise InvalidInputError(
            f"The '{field}' must be a date and time with a time zone, such as "
            f"'2030-01-01T00:00:00Z'. Got {shown(expires_at)} instead.", field=field)
    now = utcnow()
    if not now < expires_at <= now + TOKEN_MAX_LIFETIME:
        raise InvalidInputError(
            f"The '{field}' must be in the future and at most {TOKEN_MAX_LIFETIME.days} days "
            f"ahead. Got {expires_at.isoformat()} instead.", field=field)
    return expires_at


def list_tokens(session: Session, *, user: User) -> list[ApiToken]:
    """``user``'s tokens, oldest first."""
    return list(session.scalars(
        select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)))


def revoke_token(session: Session, *, user: User, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens (another user's token reads as not found)."""
    token = session.get(ApiToken, token_id)
    if token is None or token.user_id != user.id:
        raise NotFoundError(f"No token {token_id} of user {user.name!r}.", field="token_id")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
    return token


def is_disabled(session: Session, *, user: User) -> bool:
    """Whether an admin disabled ``user``."""
    return user.disabled_at is not None


def disable_user(session: Session, *, user: User) -> list[ApiToken]:
    """Revoke every token of ``user`` at once and refuse it new ones; returns its tokens.

    Idempotent: disabling a disabled user keeps its first ``disabled_at``.
    """
    now = utcnow()
    tokens = list_tokens(session, user=user)
    for token in tokens:
        if token.revoked_at is None:
            token.revoked_at = now
    user.disabled_at = user.disabled_at or now
    session.flush()
    log.warning("user %r disabled: %d token(s) revoked", user.name, len(tokens))
    return tokens


def enable_user(session: Session, *, user: User) -> None:
    """Let a disabled ``user`` get tokens again (its old tokens stay revoked)."""
    user.disabled_at = None
    session.flush()


def authenticate(session: Session, *, secret: str | None) -> User:
    """The user a bearer token belongs to (see :func:`authenticate_token`)."""
    token = authenticate_token(session, secret=secret)
    user = session.get(User, token.user_id)
    if user is None:  # pragma: no cover - the foreign key cascades
        _refuse("no such user", secret)
    if user.disabled_at is not None:
        _refuse(f"disabled user (token id {token.id})", secret)
    return user


def authenticate_token(session: Session, *, secret: str | None) -> ApiToken:
    """The valid token row a bearer secret stands for.

    Every refusal is logged (logger ``nevis.api.auth``) with its reason and the token's
    display prefix, never the secret.

    Raises:
        AuthenticationError: no token, or one that is unknown, revoked or expired (the
            message does not say which of the last three, to give guessers nothing).
    """
    if not secret:
        log.warning("authentication failed: no token")
        raise AuthenticationError(
            "This route needs an API token: send 'Authorization: Bearer <token>' (an operator "
            "makes one with `nevis tokens create`).", field="Authorization")
    if not security.looks_like_token(secret):
        _refuse("malformed token", secret)
    token = session.scalar(
        select(ApiToken).where(ApiToken.token_sha256 == security.hash_token(secret)))
    if token is None:
        _refuse("unknown token", secret)
    if token.revoked_at is not None:
        _refuse(f"revoked token (id {token.id})", secret)
    if token.expires_at is not None and token.expires_at <= utcnow():
        _refuse(f"expired token (id {token.id})", secret)
    return token


def _refuse(reason: str, secret: str) -> NoReturn:
    """Log a failed authentication without the secret, then raise the one vague 401."""
    shape = (repr(security.display_prefix(secret)) if secret.startswith(security.TOKEN_PREFIX)
             else f"<{len(secret)} characters without the {security.TOKEN_PREFIX!r} prefix>")
    log.warning("authentication failed: %s; token %s", reason, shape)
    raise AuthenticationError("The API token is not valid (unknown, revoked or expired).",
                              field="Authorization")


__all__ = [
    "TOKEN_MAX_LIFETIME", "authenticate", "authenticate_token", "check_expiry",
    "create_token", "create_user", "disable_user", "enable_user", "get_user", "is_disabled",
    "list_tokens", "list_users", "revoke_token",
]
