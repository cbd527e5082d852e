"""Users and API tokens. Operators usually use ``nevis users create`` / ``nevis tokens create``.

A token minted here without ``expires_at`` lives NEVIS_TOKEN_DEFAULT_DAYS, and never longer
than the token that mints it. Admins can revoke anyone's token and disable a user (every
token revoked at once, no new ones until enabled). ``GET /v1/users/me/quota`` shows the caller
its quotas as submissions count them, the meta-test limit per learner and stream version
included, so a 429 is never a surprise.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, status
from sqlalchemy.orm import Session

from services.coordinator.api.deps import AdminUser, CurrentToken, CurrentUser, SessionDep, SettingsDep
from services.coordinator.api.fields import NAME_PATTERN, DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import (
    LearnerRef,
    StreamRef,
    TokenCreate,
    TokenCreated,
    TokenOut,
    UserCreate,
    UserOut,
)
from services.coordinator.api.schemas_quota import ConcurrentOut, MetaTestQuotaOut, QuotaOut, QuotaUseOut
from services.coordinator.common.client_errors import ConflictError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users as crud
from services.coordinator.crud.quotas import QuotaReport, WindowUse, quota_report
from services.store.db.models_coordinator import ApiToken, User

UserName = Annotated[str, Path(pattern=NAME_PATTERN, description="A user name.")]
TokenId = Annotated[DbId, Path(description="The token's id.")]

router = APIRouter(prefix="/v1", tags=["users"], responses=problems(401, 422, 503))


def user_out(user: User) -> UserOut:
    return UserOut(
        id=user.id,
        name=user.name,
        role=user.role,
        max_concurrent=user.max_concurrent,
        max_per_day=user.max_per_day,
        created_at=user.created_at,
        disabled_at=user.disabled_at,
    )


def token_out(token: ApiToken) -> TokenOut:
    return TokenOut(
        id=token.id,
        label=token.label,
        prefix=token.token_prefix,
        created_at=token.created_at,
        expires_at=token.expires_at,
        revoked_at=token.revoked_at,
    )


@router.get("/users/me", summary="Who the token belongs to")
def read_me(user: CurrentUser) -> UserOut:
    return user_out(user)


def use_out(use: WindowUse) -> QuotaUseOut:
    return QuotaUseOut(
        used=use.used,
        limit=use.limit,
        window_days=use.window.total_seconds() / 86_400,
        next_allowed_at=use.next_allowed_at,
    )


def quota_out(report: QuotaReport) -> QuotaOut:
    return QuotaOut(
        user=report.user,
        concurrent=ConcurrentOut(used=report.open_submissions, limit=report.limits.concurrent),
        daily=use_out(report.daily),
        meta_test_limit=report.limits.meta_test,
        meta_test_window_days=report.limits.meta_test_days,
        meta_test=[
            MetaTestQuotaOut(
                learner=LearnerRef(id=m.learner_id, name=m.learner),
                stream=StreamRef(name=m.stream, version=m.version),
                use=use_out(m.use),
            )
            for m in report.meta_test
        ],
        meta_test_by_ruleset={name: use_out(use) for name, use in report.by_ruleset.items()},
    )


@router.get("/users/me/quota", summary="Your quotas and what you have used of them")
def read_my_quota(user: CurrentUser, session: SessionDep, settings: SettingsDep) -> QuotaOut:
    """Queued or running submissions (concurrent), submissions of the last 24 hours (daily),
    and meta-test submissions per learner and stream version in NEVIS_META_TEST_QUOTA_DAYS,
    each with its limit and, when used up, when the next is allowed."""
    return quota_out(quota_report(session, settings=settings, user=user))


@router.get("/users", summary="Every user (admin)", responses=problems(403))
def read_users(admin: AdminUser, session: SessionDep) -> list[UserOut]:
    return [user_out(u) for u in crud.list_users(session)]


@router.post(
    "/users", status_code=status.HTTP_201_CREATED, summary="Create a user (admin)", responses=problems(403, 409, 413)
)
def create_user(body: UserCreate, admin: AdminUser, session: SessionDep) -> UserOut:
    user = crud.create_user(
        session, name=body.name, role=body.role, max_concurrent=body.max_concurrent, max_per_day=body.max_per_day
    )
    session.commit()
    return user_out(user)


@router.post(
    "/users/{name}/tokens",
    status_code=status.HTTP_201_CREATED,
    summary="Create a token for a user (admin)",
    responses=problems(403, 404, 409, 413),
)
def create_user_token(
    name: UserName,
    body: TokenCreate,
    admin: AdminUser,
    minter: CurrentToken,
    session: SessionDep,
    settings: SettingsDep,
) -> TokenCreated:
    user = crud.get_user(session, name=name)
    return _mint(session, settings, user=user, body=body, minter=minter)


@router.get("/users/{name}/tokens", summary="A user's tokens (admin)", responses=problems(403, 404))
def read_user_tokens(name: UserName, admin: AdminUser, session: SessionDep) -> list[TokenOut]:
    return [token_out(t) for t in crud.list_tokens(session, user=crud.get_user(session, name=name))]


@router.delete(
    "/users/{name}/tokens/{token_id}", summary="Revoke any user's token (admin)", responses=problems(403, 404, 413)
)
def revoke_user_token(name: UserName, token_id: TokenId, admin: AdminUser, session: SessionDep) -> TokenOut:
    token = crud.revoke_token(session, user=crud.get_user(session, name=name), token_id=token_id)
    session.commit()
    return token_out(token)


@router.post(
    "/users/{name}/disable",
    summary="Disable a user: revoke all its tokens (admin)",
    responses=problems(403, 404, 409, 413),
)
def disable_user(name: UserName, admin: AdminUser, session: SessionDep) -> list[TokenOut]:
    """Every token of the user stops working at once, and no new one can be minted for it
    (by the API or `nevis tokens create`) until an admin enables it again."""
    user = crud.get_user(session, name=name)
    if user.id == admin.id:
        raise ConflictError(
            "An admin cannot disable itself (it would lock itself out); ask another admin.", field="name"
        )
    tokens = crud.disable_user(session, user=user)
    session.commit()
    return [token_out(t) for t in tokens]


@router.post(
    "/users/{name}/enable", summary="Let a disabled user get tokens again (admin)", responses=problems(403, 404, 413)
)
def enable_user(name: UserName, admin: AdminUser, session: SessionDep) -> UserOut:
    """Its old tokens stay revoked; mint it a new one."""
    user = crud.get_user(session, name=name)
    crud.enable_user(session, user=user)
    session.commit()
    return user_out(user)


@router.get("/tokens", summary="Your tokens (secrets are never shown again)")
def read_tokens(user: CurrentUser, session: SessionDep) -> list[TokenOut]:
    return [token_out(t) for t in crud.list_tokens(session, user=user)]


@router.post(
    "/tokens", status_code=status.HTTP_201_CREATED, summary="Create a token for yourself", responses=problems(409, 413)
)
def create_token(
    body: TokenCreate, user: CurrentUser, minter: CurrentToken, session: SessionDep, settings: SettingsDep
) -> TokenCreated:
    return _mint(session, settings, user=user, body=body, minter=minter)


def _mint(
    session: Session, settings: CoordinatorSettings, *, user: User, body: TokenCreate, minter: ApiToken
) -> TokenCreated:
    """A token that expires (by default after NEVIS_TOKEN_DEFAULT_DAYS) no later than
    ``minter``, the token of the request that asks for it."""
    token, secret = crud.create_token(
        session,
        user=user,
        label=body.label,
        expires_at=body.expires_at,
        default_lifetime=timedelta(days=settings.token_default_days),
        not_after=minter.expires_at,
    )
    session.commit()
    return TokenCreated(**token_out(token).model_dump(), token=secret)


@router.delete("/tokens/{token_id}", summary="Revoke one of your tokens", responses=problems(404, 413))
def revoke_token(token_id: TokenId, user: CurrentUser, session: SessionDep) -> TokenOut:
    token = crud.revoke_token(session, user=user, token_id=token_id)
    session.commit()
    return token_out(token)


__all__ = [
    "create_token",
    "create_user",
    "create_user_token",
    "disable_user",
    "enable_user",
    "quota_out",
    "read_me",
    "read_my_quota",
    "read_tokens",
    "read_user_tokens",
    "read_users",
    "revoke_token",
    "revoke_user_token",
    "router",
    "token_out",
    "use_out",
    "user_out",
]
