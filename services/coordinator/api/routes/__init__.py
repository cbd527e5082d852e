"""One module per resource; each exposes ``router``."""

from __future__ import annotations

from typing import Any

from services.coordinator.api.problems import MEDIA_TYPE
from services.coordinator.api.schemas import Problem


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem responses a route can give."""
    ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
    return {
        code: {"model": Problem, "description": "A problem (RFC 9457).", "content": {MEDIA_TYPE: ref}} for code in codes
    }


__all__ = ["problems"]
