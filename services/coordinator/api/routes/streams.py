"""Streams a submission may name."""

from __future__ import annotations

from fastapi import APIRouter

from services.coordinator.api.deps import CurrentUser, SettingsDep
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import StreamOut
from services.coordinator.streams import available_streams, resolve_stream

router = APIRouter(prefix="/v1/streams", tags=["streams"], responses=problems(401, 503))


@router.get("", summary="Streams you can submit to")
def read_streams(user: CurrentUser, settings: SettingsDep) -> list[StreamOut]:
    out = []
    for name in available_streams(settings):
        manifest = resolve_stream(settings, name).manifest
        out.append(
            StreamOut(
                name=name,
                version=manifest.version,
                tasks=len(manifest.tasks),
                meta_train=len(manifest.meta_train),
                meta_test=len(manifest.meta_test),
            )
        )
    return out


__all__ = ["read_streams", "router"]
