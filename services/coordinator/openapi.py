"""The OpenAPI document of the app, as checked in at ``api_schema/openapi.json``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from services.coordinator.common.config import CoordinatorSettings


def openapi_document() -> dict[str, Any]:
    """The document, built from an app on a throw-away configuration (it has no settings in it)."""
    from services.coordinator.app import create_app  # noqa: PLC0415 - the whole app, only when the document is built

    with tempfile.TemporaryDirectory(prefix="nevis-openapi-") as scratch:
        settings = CoordinatorSettings(data_dir=Path(scratch), database_url="sqlite://")
        return create_app(settings).openapi()


def render(document: dict[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


__all__ = ["openapi_document", "render"]
