"""Learners: register an image + entry point, or upload a Python bundle; list and read."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile, status
from fastapi import Path as PathParam
from sqlalchemy.orm import Session

from services.coordinator.api.deps import (
    CurrentUser,
    Limit,
    Offset,
    SessionDep,
    SessionsDep,
    SettingsDep,
    StoreDep,
    UploadUser,
)
from services.coordinator.api.fields import ENTRYPOINT_MAX, NAME_MAX, DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import BundleOut, LearnerCreate, LearnerOut, Page
from services.coordinator.common.client_errors import AuthenticationError, ConflictError, PayloadTooLargeError
from services.coordinator.common.validation import (
    check_entrypoint,
    check_fits_node,
    check_image_policy,
    check_image_ref,
    check_name,
    check_resources,
)
from services.coordinator.crud import learners as crud
from services.coordinator.crud.learners import OwnedLearner
from services.coordinator.learner_images import register_image
from services.store.db import declare_writer
from services.store.db.models_coordinator import User
from services.store.key_layout import bundle_key
from workers.sandbox.bundles import UNPACK_FACTOR, bundle_kind, check_bundle, safe_filename

router = APIRouter(prefix="/v1/learners", tags=["learners"], responses=problems(401, 422, 503))
BUNDLE_PATH = "/v1/learners/bundle"
_CHUNK = 1024 * 1024


def learner_out(owned: OwnedLearner) -> LearnerOut:
    row = owned.learner
    bundle = (
        BundleOut(key=row.bundle_key, sha256=row.bundle_sha256, size_bytes=owned.bundle_size_bytes)
        if row.bundle_key
        else None
    )
    return LearnerOut(
        id=row.id,
        name=row.name,
        owner=owned.owner.name if owned.owner else None,
        entrypoint=row.entrypoint,
        image=row.image_ref,
        image_size_bytes=owned.image_size_bytes,
        bundle=bundle,
        resources=dict(row.resources or {}),
        created_at=row.created_at,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=problems(409, 413),
    summary="Register a learner: container image + entry point + resources",
)
def create_learner(body: LearnerCreate, user: UploadUser, sessions: SessionsDep, settings: SettingsDep) -> LearnerOut:
    # An image is resolved to a digest and checked (pulled, unpacked within the caps, the entry
    # point's module found in it) before the learner is recorded, pinned by that digest; that
    # takes no database lock (SQLite's write lock comes with the writer session's first statement).
    resources = check_resources(body.resources.model_dump())
    image, image_size = body.image, None
    if image is not None:
        check_image_ref(image)
        check_image_policy(image, settings.image_policy)
        check_entrypoint(body.entrypoint)
        with sessions() as session:  # a reader: a taken name costs no unpack
            _check_name_free(session, body.name)
        registered = register_image(image, entrypoint=body.entrypoint, settings=settings)
        image, image_size = registered.ref, registered.size_bytes
        check_image_policy(image, settings.image_policy)  # the pinned reference, as tasks run it
    with sessions() as session:
        declare_writer(session)
        owner = session.get(User, user.id)
        if owner is None:  # deleted meanwhile
            raise AuthenticationError("The API token's user no longer exists.", field="Authorization")
        owned = crud.create_learner(
            session,
            owner=owner,
            name=body.name,
            entrypoint=body.entrypoint,
            image=image,
            resources=resources,
            image_size_bytes=image_size,
        )
        session.commit()
        return learner_out(owned)


@router.post(
    "/bundle",
    status_code=status.HTTP_201_CREATED,
    responses=problems(409, 411, 413),
    summary="Upload a learner as a Python bundle (wheel, .zip or .tar.gz)",
)
def upload_bundle(
    user: UploadUser,
    sessions: SessionsDep,
    settings: SettingsDep,
    store: StoreDep,
    file: Annotated[UploadFile, File(description="A .whl, .zip, .tar.gz or .tgz.")],
    name: Annotated[str, Form(max_length=NAME_MAX)],
    entrypoint: Annotated[str, Form(max_length=ENTRYPOINT_MAX)],
    cpus: Annotated[float, Form()] = 1.0,
    gpus: Annotated[int, Form()] = 0,
    memory_mb: Annotated[int, Form()] = 2048,
) -> LearnerOut:
    """Checks everything it can (fields, name, archive) before it opens the session that
    writes, so a hostile archive never holds the database write lock (SQLite's BEGIN
    IMMEDIATE is taken by a writer session's first statement)."""
    check_name(name)
    check_entrypoint(entrypoint)
    resources = check_fits_node(
        check_resources({"cpus": cpus, "gpus": gpus, "memory_mb": memory_mb}),
        node_cpus=settings.node_cpus,
        node_gpus=settings.node_gpus,
    )
    filename = file.filename or ""
    bundle_kind(filename)
    with sessions() as session:  # a reader: no lock held while the upload is checked
        _check_name_free(session, name)
    with tempfile.TemporaryDirectory(prefix="nevis-upload-") as scratch:
        path = Path(scratch) / safe_filename(filename)
        size, digest = _spool(file, path, limit=settings.bundle_max_bytes)
        check_bundle(path, filename=filename, max_unpacked_bytes=UNPACK_FACTOR * settings.bundle_max_bytes)
        info = store.put_file(bundle_key(digest, path.name), path)
    with sessions() as session:
        declare_writer(session)
        owner = session.get(User, user.id)
        if owner is None:  # deleted while uploading
            raise AuthenticationError("The API token's user no longer exists.", field="Authorization")
        owned = crud.create_learner(
            session,
            owner=owner,
            name=name,
            entrypoint=entrypoint,
            image=None,
            resources=resources,
            bundle_key=info.key,
            bundle_sha256=info.sha256,
            bundle_size_bytes=size,
        )
        session.commit()
        return learner_out(owned)


def _check_name_free(session: Session, name: str) -> None:
    if crud.learner_name_taken(session, name=name):
        raise ConflictError(f"A learner named {name!r} exists already; pick another name.", field="name")


@router.get("", summary="Learners you may use (all, for an admin)")
def read_learners(user: CurrentUser, session: SessionDep, limit: Limit = 20, offset: Offset = 0) -> Page[LearnerOut]:
    rows, total = crud.list_learners(session, user=user, limit=limit, offset=offset)
    return Page[LearnerOut](items=[learner_out(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/{learner_id}", responses=problems(404), summary="One learner")
def read_learner(
    learner_id: Annotated[DbId, PathParam(description="The learner's id.")], user: CurrentUser, session: SessionDep
) -> LearnerOut:
    return learner_out(crud.get_learner(session, user=user, learner_id=learner_id))


def _spool(upload: UploadFile, path: Path, *, limit: int) -> tuple[int, str]:
    """Copy the upload to ``path`` within ``limit`` bytes; returns its size and sha256."""
    digest, size = hashlib.sha256(), 0
    with open(path, "wb") as out:
        while chunk := upload.file.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise PayloadTooLargeError(
                    f"The 'file' is larger than {limit} bytes (NEVIS_BUNDLE_MAX_BYTES).", field="file"
                )
            digest.update(chunk)
            out.write(chunk)
    return size, digest.hexdigest()


__all__ = ["BUNDLE_PATH", "create_learner", "learner_out", "read_learner", "read_learners", "router", "upload_bundle"]
