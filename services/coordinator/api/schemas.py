"""Request and response bodies (pydantic, at the HTTP edge only).

Requests forbid unknown fields, so a typo is a 422 naming it instead of a silent default.
Types are checked here, strictly (``true`` is no integer, ``1e309`` and ``NaN`` no number),
with every integer within its database column and every string and list bounded (see
:mod:`services.coordinator.api.fields`); values (syntax, finer ranges) by the domain checks,
whose messages name the field the same way.

Here: the shared base models, users and tokens, learners, stream references. Submission bodies
are :mod:`~services.coordinator.api.schemas_submissions`, quota answers
:mod:`~services.coordinator.api.schemas_quota`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from services.coordinator.api.fields import (
    ENTRYPOINT_MAX,
    IMAGE_MAX,
    Label,
    Name,
    StrictDbCount,
    StrictFloat,
    StrictInt,
)

T = TypeVar("T")


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Problem(BaseModel):
    """RFC 9457 problem details; ``field`` names the offending input."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    field: str | None = None
    errors: list[dict[str, str]] | None = None


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


# --- users and tokens -------------------------------------------------------------------


class UserCreate(Request):
    name: Name = Field(examples=["alice"])
    role: Literal["admin", "submitter"] = "submitter"
    max_concurrent: StrictDbCount | None = Field(default=None, description="Queued + running at once.")
    max_per_day: StrictDbCount | None = Field(default=None, description="Submissions per 24 hours.")


class UserOut(BaseModel):
    id: int
    name: str
    role: str
    max_concurrent: int | None
    max_per_day: int | None
    created_at: datetime
    disabled_at: datetime | None = Field(default=None, description="Set while an admin has disabled the user.")


class TokenCreate(Request):
    label: Label = Field(default="api", examples=["laptop"])
    expires_at: AwareDatetime | None = Field(
        default=None,
        description="When the token stops working: with a time zone (e.g. "
        "2026-12-31T00:00:00Z), after now and at most 366 days ahead.",
    )


class TokenOut(BaseModel):
    id: int
    label: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret; shown only in this response.")


# --- learners ---------------------------------------------------------------------------


class Resources(Request):
    cpus: StrictFloat = Field(default=1.0, description="CPUs per task, in (0, 512].")
    gpus: StrictInt = Field(default=0, description="GPUs per task, in [0, 64].")
    memory_mb: StrictInt = Field(default=2048, description="Memory per task (MiB), in [64, 4194304].")


class LearnerCreate(Request):
    name: Name = Field(examples=["my-learner"])
    entrypoint: Annotated[str, StringConstraints(max_length=ENTRYPOINT_MAX)] = Field(
        examples=["my_package.learner:make"], description="'package.module:factory' that returns a learner."
    )
    image: Annotated[str, StringConstraints(max_length=IMAGE_MAX)] | None = Field(
        default=None, examples=["ghcr.io/me/learner:1.0"], description="Pinned container image (tag or digest)."
    )
    resources: Resources = Field(default_factory=Resources)


class BundleOut(BaseModel):
    key: str
    sha256: str
    size_bytes: int | None


class LearnerOut(BaseModel):
    id: int
    name: str
    owner: str | None
    entrypoint: str
    image: str | None
    image_size_bytes: int | None = Field(
        default=None,
        description="Bytes the image unpacked to when its registration read it (within NEVIS_IMAGE_MAX_BYTES); "
        "null for a bundle, or an image nothing read at registration (a digest the kuberay backend's kubelet pulls).",
    )
    bundle: BundleOut | None
    resources: dict[str, Any]
    created_at: datetime


# --- references and streams -------------------------------------------------------------


class LearnerRef(BaseModel):
    id: int
    name: str


class StreamRef(BaseModel):
    name: str
    version: str


class StreamOut(BaseModel):
    name: str
    version: str
    tasks: int
    meta_train: int
    meta_test: int


__all__ = [
    "BundleOut",
    "LearnerCreate",
    "LearnerOut",
    "LearnerRef",
    "Page",
    "Problem",
    "Request",
    "Resources",
    "StreamOut",
    "StreamRef",
    "TokenCreate",
    "TokenCreated",
    "TokenOut",
    "UserCreate",
    "UserOut",
]
