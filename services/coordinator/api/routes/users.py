"""Users and API tokens. Operators usually use ``nevis users create`` / ``nevis tokens create``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from services.coordinator.api.deps import AdminUser, CurrentUser, SessionDep
from services.coordinator.api.fields import NAME_PATTERN, DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import TokenCreate, TokenCreated, TokenOut, UserCreate, UserOut
from services.coordinator.crud import users as crud
from services.store.db.models_coordinator import ApiToken, User

router = APIRouter(prefix="/v1", tags=["users"], responses=problems(401, 422, 503))


def user_out(user: User) -> UserOut:
    return UserOut(id=user.id, name=user.name, role=user.role, max_concurrent=user.max_concurrent,
                   max_per_day=user.max_per_day, created_at=user.created_at)


def token_out(token: ApiToken) -> TokenOut:
    return TokenOut(id=token.id, label=token.label, prefix=token.token_prefix,
                    created_at=token.created_at, expires_at=token.expires_at,
                    revoked_at=token.revoked_at)


@router.get("/users/me", summary="Who the token belongs to")
def read_me(user: CurrentUser) -> UserOut:
    return user_out(user)


@router.get("/users", summary="Every user (admin)", responses=problems(403))
def read_users(admin: AdminUser, session: SessionDep) -> list[UserOut]:
    return [user_out(u) for u in crud.list_users(session)]


@router.post("/users", status_code=status.HTTP_201_CREATED, summary="Create a user (admin)",
             responses=problems(403, 409, 413))
def create_user(body: UserCreate, admin: AdminUser, session: SessionDep) -> UserOut:
    user = crud.create_user(session, name=body.name, role=body.role,
                            max_concurrent=body.max_concurrent, max_per_day=body.max_per_day)
    session.commit()
    return user_out(user)


@router.post("/users/{name}/tokens", status_code=status.HTTP_201_CREATED,
             summary="Create a token for a user (admin)", responses=problems(403, 404, 413))
def create_user_token(name: Annotated[str, Path(pattern=NAME_PATTERN, description="A user name.")],
                      body: TokenCreate, admin: AdminUser, session: SessionDep) -> TokenCreated:
    user = crud.get_user(session, name=name)
    token, secret = crud.create_token(session, user=user, label=body.label,
                                      expires_at=body.expires_at)
    session.commit()
    return TokenCreated(**token_out(token).model_dump(), token=secret)


@router.get("/tokens", summary="Your tokens (secrets are never shown again)")
def read_tokens(user: CurrentUser, session: SessionDep) -> list[TokenOut]:
    return [token_out(t) for t in crud.list_tokens(session, user=user)]


@router.post("/tokens", status_code=status.HTTP_201_CREATED, summary="Create a token for yourself",
             responses=problems(413))
def create_token(body: TokenCreate, user: CurrentUser, session: SessionDep) -> TokenCreated:
    token, secret = crud.create_token(session, user=user, label=body.label,
                                      expires_at=body.expires_at)
    session.commit()
    return TokenCreated(**token_out(token).model_dump(), token=secret)


@router.delete("/tokens/{token_id}", summary="Revoke one of your tokens", responses=problems(404, 413))
def revoke_token(token_id: Annotated[DbId, Path(description="The token's id.")],
                 user: CurrentUser, session: SessionDep) -> TokenOut:
    token = crud.revoke_token(session, user=user, token_id=token_id)
    session.commit()
    return token_out(token)


__all__ = [
    "create_token", "create_user", "create_user_token", "read_me", "read_tokens", "read_users",
    "revoke_token", "router", "token_out", "user_out",
]
