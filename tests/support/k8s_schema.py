"""What a structural CRD schema lets through silently: the API server prunes keys it does not
declare, so a misspelt key in a manifest is lost without an error. Tests check for them."""

from __future__ import annotations

from typing import Any


def unknown_keys(instance: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of ``instance`` that ``schema`` does not declare (what the API server would drop)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(instance, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in instance.items():
            if props is not None and key in props:
                found += unknown_keys(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += unknown_keys(value, extra, f"{path}.{key}")
            elif props is not None:
                found.append(f"{path}.{key}")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(instance):
            found += unknown_keys(item, schema["items"], f"{path}[{i}]")
    return found
