"""Users and their API tokens.

Token hygiene (issue 13): a token minted without an expiry gets a default one; no token
mints one that outlives it; every failed authentication is logged with the token's display
prefix (never its secret). Disabling a user (``users.disabled_at``) revokes every token of it
at once and refuses it new ones, and its requests, until an admin enables it again.

Lineage: a token minted through the API records the token that minted it
(``parent_token_id``), and revoking a token revokes every token minted from it, down the
chain, in the same transaction; so a leaked token cannot leave working offspring behind. A
user holds at most ``NEVIS_MAX_TOKENS_PER_USER`` live tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn

from sqlalchemy import ColumnElement, Select, func, or_, select
from sqlalchemy.orm import Session, aliased

from services.coordinator.common import security
from services.coordinator.common.client_errors import (
    AuthenticationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from services.coordinator.common.validation import DB_INT_MAX, check_name, shown
from services.store.db.models_coordinator import ROLES, ApiToken, User
from services.store.db.types import utcnow

TOKEN_MAX_LIFETIME = timedelta(days=security.TOKEN_MAX_DAYS)
"""The furthest a token's ``expires_at`` may lie ahead."""
_MINTER = "nevis.minter"
"""Key in ``Session.info`` of the :class:`Minter` that a request's session mints for."""

log = logging.getLogger("nevis.api.auth")


@dataclass(frozen=True)
class Minter:
    """Who mints through a session: the token that authenticated the request, and the cap on
    live tokens per user (``NEVIS_MAX_TOKENS_PER_USER``) that the app runs with."""

    token_id: int
    max_tokens: int | None


def create_user(
    session: Session, *, name: str, role: str, max_concurrent: int | None = None, max_per_day: int | None = None
) -> User:
    """A new user; a taken name is a ConflictError."""
    check_name(name)
    if role not in ROLES:
        raise InvalidInputError(f"The 'role' must be one of {', '.join(ROLES)}. Got {role!r} instead.", field="role")
    for field, value in (("max_concurrent", max_concurrent), ("max_per_day", max_per_day)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= DB_INT_MAX
        ):
            raise InvalidInputError(
                f"The '{field}' must be an int in [0, {DB_INT_MAX}] or null. Got {shown(value)} instead.", field=field
            )
    if session.scalar(select(User.id).where(User.name == name)) is not None:
        raise ConflictError(f"A user named {name!r} exists already; pick another name.", field="name")
    user = User(name=name, role=role, max_concurrent=max_concurrent, max_per_day=max_per_day)
    session.add(user)
    session.flush()
    return user


def get_user(session: Session, *, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFoundError(f"No user named {name!r}; create one with `nevis users create`.", field="user")
    return user


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.id)))


def mint_for(session: Session, *, token: ApiToken, max_tokens: int | None) -> None:
    """Record that ``session`` acts for ``token``: what it mints descends from that token and
    counts against ``max_tokens``. The API's authentication calls this, so every route that
    mints through the request's session records the lineage without passing it along."""
    session.info[_MINTER] = Minter(token_id=token.id, max_tokens=max_tokens)


def create_token(
    session: Session,
    *,
    user: User,
    label: str,
    expires_at: datetime | None = None,
    default_lifetime: timedelta | None = None,
    not_after: datetime | None = None,
    parent_id: int | None = None,
    max_tokens: int | None = None,
) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret (shown once).

    Args:
        expires_at: when the token stops working; ``None`` takes ``default_lifetime`` from
            now (``None`` too: a token that never expires, for tests and old bootstraps).
        not_after: the expiry of the token that mints this one, which the new token may not
            outlive (a default expiry is cut to it; an explicit later one is refused).
        parent_id: the token that mints this one; default the session's :func:`mint_for`
            token (none for the CLI).
        max_tokens: the most live tokens ``user`` may hold; default the session's cap.

    Raises:
        InvalidInputError: a bad label, or an ``expires_at`` out of range or past ``not_after``.
        ConflictError: ``user`` is disabled, or holds ``max_tokens`` live tokens already.
        AuthenticationError: the parent token was revoked meanwhile.
    """
    if not isinstance(label, str) or not 1 <= len(label) <= 100:
        raise InvalidInputError(
            f"The 'label' must be a string of 1-100 characters. Got {shown(label)} instead.", field="label"
        )
    if expires_at is not None:
        check_expiry(expires_at)
        if not_after is not None and expires_at > not_after:
            raise InvalidInputError(
                f"The 'expires_at' ({expires_at.isoformat()}) is later than the expiry of the "
                f"token used to create it ({not_after.isoformat()}); a token cannot outlive "
                "the token that minted it.",
                field="expires_at",
            )
    elif default_lifetime is not None:
        expires_at = utcnow() + min(default_lifetime, TOKEN_MAX_LIFETIME)
        if not_after is not None:
            expires_at = min(expires_at, not_after)
    elif not_after is not None:
        expires_at = not_after
    # The user's row first, then the parent's: the order disable_user locks in too.
    if _lock_user(session, user) is not None or is_disabled(session, user=user):
        raise ConflictError(
            f"User {user.name!r} is disabled and gets no new tokens; an admin enables it with "
            f"POST /v1/users/{user.name}/enable or `nevis users enable {user.name}`.",
            field="user",
        )
    minter = session.info.get(_MINTER)
    if parent_id is None and minter is not None:
        parent_id = minter.token_id
    if max_tokens is None and minter is not None:
        max_tokens = minter.max_tokens
    if parent_id is not None:
        _check_parent_live(session, parent_id)
    if max_tokens is not None:
        _check_token_cap(session, user=user, cap=max_tokens)
    made = security.new_token()
    token = ApiToken(
        user_id=user.id,
        label=label,
        token_prefix=made.prefix,
        token_sha256=made.sha256,
        expires_at=expires_at,
        parent_token_id=parent_id,
    )
    session.add(token)
    session.flush()
    return token, made.secret


def _lock_user(session: Session, user: User) -> datetime | None:
    """Hold ``user``'s row until commit (PostgreSQL), so that two concurrent mints cannot both
    pass the cap nor a mint slip past a concurrent disabling; returns its ``disabled_at`` as
    committed. SQLite writers take turns anyway."""
    return session.scalar(select(User.disabled_at).where(User.id == user.id).with_for_update())


def _check_parent_live(session: Session, parent_id: int) -> None:
    """Refuse to mint from a token revoked since the request authenticated.

    The row lock makes a concurrent revocation wait for this mint's commit (and then see the
    child), or this mint wait for the revocation's (and then see it revoked): no child escapes.
    """
    revoked = session.execute(select(ApiToken.revoked_at).where(ApiToken.id == parent_id).with_for_update()).first()
    if revoked is None or revoked[0] is not None:
        raise AuthenticationError("The API token is not valid (unknown, revoked or expired).", field="Authorization")


def live_token_count(session: Session, *, user: User) -> int:
    """How many of ``user``'s tokens work now (neither revoked nor expired)."""
    return session.scalar(select(func.count()).select_from(ApiToken).where(ApiToken.user_id == user.id, _live())) or 0


def _live() -> ColumnElement[bool]:
    return ApiToken.revoked_at.is_(None) & or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow())


def _check_token_cap(session: Session, *, user: User, cap: int) -> None:
    held = live_token_count(session, user=user)
    if held >= cap:
        raise ConflictError(
            f"User {user.name!r} holds {held} live tokens, the most one user may hold "
            f"(NEVIS_MAX_TOKENS_PER_USER={cap}); revoke one (DELETE /v1/tokens/{{id}} or "
            "`nevis tokens revoke`) before minting another.",
            field="user",
        )


def check_expiry(expires_at: datetime, *, field: str = "expires_at") -> datetime:
    """A token's expiry: an aware instant after now and at most :data:`TOKEN_MAX_LIFETIME` ahead."""
    if not isinstance(expires_at, datetime) or expires_at.utcoffset() is None:
        raise InvalidInputError(
            f"The '{field}' must be a date and time with a time zone, such as "
            f"'2030-01-01T00:00:00Z'. Got {shown(expires_at)} instead.",
            field=field,
        )
    now = utcnow()
    if not now < expires_at <= now + TOKEN_MAX_LIFETIME:
        raise InvalidInputError(
            f"The '{field}' must be in the future and at most {TOKEN_MAX_LIFETIME.days} days "
            f"ahead. Got {expires_at.isoformat()} instead.",
            field=field,
        )
    return expires_at


def list_tokens(session: Session, *, user: User) -> list[ApiToken]:
    """``user``'s tokens, oldest first."""
    return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)))


def revoke_token(session: Session, *, user: User, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens and every token minted from it, down the chain
    (another user's token reads as not found)."""
    return revoke_token_tree(session, user=user, token_id=token_id)[0]


def revoke_token_tree(session: Session, *, user: User, token_id: int) -> tuple[ApiToken, list[ApiToken]]:
    """:func:`revoke_token`, also returning the tokens minted from it that this revoked."""
    token = session.get(ApiToken, token_id)
    if token is None or token.user_id != user.id:
        raise NotFoundError(f"No token {token_id} of user {user.name!r}.", field="token_id")
    minted = [t for t in revoke_lineage(session, roots=ApiToken.id == token.id) if t.id != token.id]
    log.info("token %d of user %r revoked, with %d token(s) minted from it", token.id, user.name, len(minted))
    return token, minted


def revoke_lineage(session: Session, *, roots: ColumnElement[bool]) -> list[ApiToken]:
    """Revoke the tokens ``roots`` selects and all their descendants; returns the tokens it
    revoked (those revoked already are left with their first ``revoked_at``).

    It walks again until a walk finds nothing live: a token being minted from one of these
    holds its parent's row lock, so it is committed, and visible, by the time this transaction
    has revoked that parent (see :func:`_check_parent_live`). Rows are locked in id order.
    """
    now, revoked = utcnow(), []
    while True:
        live = list(
            session.scalars(
                select(ApiToken)
                .where(ApiToken.id.in_(_lineage(roots)), ApiToken.revoked_at.is_(None))
                .order_by(ApiToken.id)
                .with_for_update()
            )
        )
        if not live:
            return revoked
        for token in live:
            token.revoked_at = now
        session.flush()
        revoked.extend(live)


def _lineage(roots: ColumnElement[bool]) -> Select[tuple[int]]:
    """The ids of the tokens ``roots`` selects and of every token minted from them (a
    recursive walk by ``parent_token_id``; UNION keeps it finite whatever the rows say)."""
    tree = select(ApiToken.id).where(roots).cte("lineage", recursive=True)
    child = aliased(ApiToken)
    tree = tree.union(select(child.id).where(child.parent_token_id == tree.c.id))
    return select(tree.c.id)


def is_disabled(session: Session, *, user: User) -> bool:
    """Whether an admin disabled ``user``."""
    return user.disabled_at is not None


def disable_user(session: Session, *, user: User) -> list[ApiToken]:
    """Revoke every token of ``user`` at once, and every token minted from them (another
    user's too), and refuse it new ones; returns its tokens.

    Idempotent: disabling a disabled user keeps its first ``disabled_at``.
    """
    _lock_user(session, user)
    revoked = revoke_lineage(session, roots=ApiToken.user_id == user.id)
    user.disabled_at = user.disabled_at or utcnow()
    session.flush()
    tokens = list_tokens(session, user=user)
    log.warning(
        "user %r disabled: %d token(s) revoked, %d of them minted for other users",
        user.name,
        len(revoked),
        sum(t.user_id != user.id for t in revoked),
    )
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
            "makes one with `nevis tokens create`).",
            field="Authorization",
        )
    if not security.looks_like_token(secret):
        _refuse("malformed token", secret)
    token = _by_secret(session, secret)
    if token is None:
        _refuse("unknown token", secret)
    if token.revoked_at is not None:
        _refuse(f"revoked token (id {token.id})", secret)
    if token.expires_at is not None and token.expires_at <= utcnow():
        _refuse(f"expired token (id {token.id})", secret)
    return token


def live_token(session: Session, *, secret: str) -> ApiToken | None:
    """The token ``secret`` stands for if it works now, else ``None``; quiet (no log), for
    callers that only need to know who is asking, such as the write rate limit."""
    if not security.looks_like_token(secret):
        return None
    token = _by_secret(session, secret)
    if token is None or token.revoked_at is not None or (token.expires_at is not None and token.expires_at <= utcnow()):
        return None
    return token


def _by_secret(session: Session, secret: str) -> ApiToken | None:
    return session.scalar(select(ApiToken).where(ApiToken.token_sha256 == security.hash_token(secret)))


def _refuse(reason: str, secret: str) -> NoReturn:
    """Log a failed authentication without the secret, then raise the one vague 401."""
    shape = (
        repr(security.display_prefix(secret))
        if secret.startswith(security.TOKEN_PREFIX)
        else f"<{len(secret)} characters without the {security.TOKEN_PREFIX!r} prefix>"
    )
    log.warning("authentication failed: %s; token %s", reason, shape)
    raise AuthenticationError("The API token is not valid (unknown, revoked or expired).", field="Authorization")


__all__ = [
    "TOKEN_MAX_LIFETIME",
    "Minter",
    "authenticate",
    "authenticate_token",
    "check_expiry",
    "create_token",
    "create_user",
    "disable_user",
    "enable_user",
    "get_user",
    "is_disabled",
    "list_tokens",
    "list_users",
    "live_token",
    "live_token_count",
    "mint_for",
    "revoke_lineage",
    "revoke_token",
    "revoke_token_tree",
]
