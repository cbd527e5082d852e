"""Users and their API tokens."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.coordinator.core import security
from services.coordinator.core.errors import (
    AuthenticationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from services.coordinator.core.validation import check_name
from services.store.db.models_coordinator import ROLES, ApiToken, User
from services.store.db.types import utcnow


def create_user(session: Session, *, name: str, role: str, max_concurrent: int | None = None,
                max_per_day: int | None = None) -> User:
    """A new user; a taken name is a ConflictError."""
    check_name(name)
    if role not in ROLES:
        raise InvalidInputError(
            f"The 'role' must be one of {', '.join(ROLES)}. Got {role!r} instead.", field="role")
    for field, value in (("max_concurrent", max_concurrent), ("max_per_day", max_per_day)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidInputError(
                f"The '{field}' must be an int >= 0 or null. Got {value!r} instead.", field=field)
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
            f"The 'label' must be a string of 1-100 characters. Got {label!r} instead.",
            field="label")
    if expires_at is not None and expires_at <= utcnow():
        raise InvalidInputError(
            f"The 'expires_at' must be in the future. Got {expires_at.isoformat()} instead.",
            field="expires_at")
    made = security.new_token()
    token = ApiToken(user_id=user.id, label=label, token_prefix=made.prefix,
                     token_sha256=made.sha256, expires_at=expires_at)
    session.add(token)
    session.flush()
    return token, made.secret


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
    "authenticate", "create_token", "create_user", "get_user", "list_tokens", "list_users",
    "revoke_token",
]
