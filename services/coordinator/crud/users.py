"""Users and their API tokens."""

from __future__ import annotations

from datetime import datetime, timedelta

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
                 expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret (shown once)."""
    if not isinstance(label, str) or not 1 <= len(label) <= 100:
        raise InvalidInputError(
            f"The 'label' must be a string of 1-100 characters. Got {shown(label)} instead.",
            field="label")
    if expires_at is not None:
        check_expiry(expires_at)
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


def authenticate(session: Session, *, secret: str | None) -> User:
    """The user a bearer token belongs to.

    Raises:
        AuthenticationError: no token, or one that is unknown, revoked or expired (the
            message does not say which of the last three, to give guessers nothing).
    """
    if not secret:
        raise AuthenticationError(
            "This route needs an API token: send 'Authorization: Bearer <token>' (an operator "
            "makes one with `nevis tokens create`).", field="Authorization")
    invalid = AuthenticationError("The API token is not valid (unknown, revoked or expired).",
                                  field="Authorization")
    if not security.looks_like_token(secret):
        raise invalid
    token = session.scalar(
        select(ApiToken).where(ApiToken.token_sha256 == security.hash_token(secret)))
    now = utcnow()
    if token is None or token.revoked_at is not None or (
            token.expires_at is not None and token.expires_at <= now):
        raise invalid
    user = session.get(User, token.user_id)
    if user is None:
        raise invalid
    return user


__all__ = [
    "TOKEN_MAX_LIFETIME", "authenticate", "check_expiry", "create_token", "create_user",
    "get_user", "list_tokens", "list_users", "revoke_token",
]
