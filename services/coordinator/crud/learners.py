"""Learners registered through the API: an image + entry point, or an uploaded bundle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import ConflictError, NotFoundError
from services.coordinator.common.validation import ResourceRequest, check_entrypoint, check_image_ref, check_name
from services.store.db.models import Learner
from services.store.db.models_coordinator import LearnerOwner, User


@dataclass(frozen=True)
class OwnedLearner:
    """A learner row with its owner (``None`` for learners made by ``nevis run``)."""

    learner: Learner
    owner: User | None
    bundle_size_bytes: int | None
    image_size_bytes: int | None = None  # what the image unpacked to at registration, if it was read


def create_learner(
    session: Session,
    *,
    owner: User,
    name: str,
    entrypoint: str,
    image: str | None,
    resources: ResourceRequest,
    bundle_key: str | None = None,
    bundle_sha256: str | None = None,
    bundle_size_bytes: int | None = None,
    image_size_bytes: int | None = None,
) -> OwnedLearner:
    """Register a learner; a taken name is a ConflictError naming ``name``."""
    check_name(name)
    check_entrypoint(entrypoint)
    if image is not None:
        check_image_ref(image)
    if session.scalar(select(Learner.id).where(Learner.name == name)) is not None:
        raise ConflictError(f"A learner named {name!r} exists already; pick another name.", field="name")
    learner = Learner(
        name=name,
        entrypoint=entrypoint,
        image_ref=image,
        bundle_key=bundle_key,
        bundle_sha256=bundle_sha256,
        resources=resources.to_dict(),
    )
    session.add(learner)
    session.flush()
    session.add(
        LearnerOwner(
            learner_id=learner.id,
            user_id=owner.id,
            bundle_size_bytes=bundle_size_bytes,
            image_size_bytes=image_size_bytes,
        )
    )
    session.flush()
    return OwnedLearner(learner, owner, bundle_size_bytes, image_size_bytes)


def learner_name_taken(session: Session, *, name: str) -> bool:
    return session.scalar(select(Learner.id).where(Learner.name == name)) is not None


def get_learner(session: Session, *, user: User, learner_id: int, field: str = "learner_id") -> OwnedLearner:
    """A learner ``user`` may use: its own, or any for an admin."""
    row = session.execute(
        select(Learner, LearnerOwner, User)
        .outerjoin(LearnerOwner, LearnerOwner.learner_id == Learner.id)
        .outerjoin(User, User.id == LearnerOwner.user_id)
        .where(Learner.id == learner_id)
    ).first()
    if row is None or (user.role != "admin" and (row[2] is None or row[2].id != user.id)):
        raise NotFoundError(f"No learner with id {learner_id} that you may use.", field=field)
    return _owned(row)


def list_learners(session: Session, *, user: User, limit: int, offset: int) -> tuple[list[OwnedLearner], int]:
    """The learners ``user`` may use (all, for an admin), newest first, and their count."""
    query = (
        select(Learner, LearnerOwner, User)
        .outerjoin(LearnerOwner, LearnerOwner.learner_id == Learner.id)
        .outerjoin(User, User.id == LearnerOwner.user_id)
    )
    if user.role != "admin":
        query = query.where(LearnerOwner.user_id == user.id)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.execute(query.order_by(Learner.id.desc()).limit(limit).offset(offset)).all()
    return [_owned(r) for r in rows], total


def _owned(row: Any) -> OwnedLearner:
    """An OwnedLearner from a (Learner, LearnerOwner | None, User | None) row."""
    learner, ownership, owner = row
    if ownership is None:
        return OwnedLearner(learner, owner, None)
    return OwnedLearner(learner, owner, ownership.bundle_size_bytes, ownership.image_size_bytes)


__all__ = ["OwnedLearner", "create_learner", "get_learner", "learner_name_taken", "list_learners"]
