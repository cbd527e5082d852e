"""MkDocs hook: the API reference page, rendered from api_schema/openapi.json at build time.

``render(spec)`` turns the OpenAPI document into Markdown (one section per route, one per
schema); ``on_files`` adds it to the site as ``api.md``, so the page always matches the
document the coordinator serves (tests/unit/test_docs_site.py checks it names every route and
schema). Nothing here reaches the network.

``on_config`` also drops, from the nav, pages that other work adds and that may not exist yet
(``OPTIONAL_PAGES``), so a build never fails on a page not written yet; every other nav entry
must exist (strict mode).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "api_schema" / "openapi.json"
PAGE = "api.md"
OPTIONAL_PAGES = frozenset({"data-fetch.md", "data-format.md"})
METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: Any) -> str:
    """Text made safe for one Markdown table cell."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _anchor(name: str) -> str:
    return "schema-" + "".join(c if c.isalnum() else "-" for c in name).lower()


def _type(schema: dict[str, Any]) -> str:
    """A short Markdown type: a link for a $ref, ``a | b`` for anyOf, ``list[...]``."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " \\| ".join(_type(s) for s in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "object")
    if kind == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map[string, {_type(schema['additionalProperties'])}]"
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if fmt else str(kind)


def _body_schema(content: dict[str, Any]) -> str:
    return ", ".join(f"`{media}`: {_type(c.get('schema', {}))}" for media, c in content.items())


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    title = op.get("summary") or op.get("operationId", "")
    out = [f"### `{method.upper()} {path}`", ""]
    if title:
        out += [f"**{title}**", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            out.append(
                f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
            )
        out.append("")
    body = op.get("requestBody")
    if body:
        req = "required" if body.get("required") else "optional"
        out += [f"Request body ({req}): {_body_schema(body.get('content', {}))}", ""]
    out += ["| status | description | body |", "|---|---|---|"]
    for status, resp in op.get("responses", {}).items():
        out.append(
            f"| {status} | {_cell(resp.get('description', ''))} | {_body_schema(resp.get('content', {})) or '—'} |"
        )
    return out + [""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name} {{#{_anchor(name)}}}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties")
    if not props:
        return out + [f"Type: {_type(schema)}", ""]
    required = set(schema.get("required", []))
    out += ["| field | type | required | description |", "|---|---|---|---|"]
    for field, prop in props.items():
        desc = prop.get("description", "")
        if "default" in prop:
            desc = f"{desc} (default `{json.dumps(prop['default'])}`)".strip()
        out.append(f"| `{field}` | {_type(prop)} | {'yes' if field in required else 'no'} | {_cell(desc)} |")
    return out + [""]


def render(spec: dict[str, Any]) -> str:
    """The API reference as one Markdown page."""
    info = spec.get("info", {})
    out = [
        f"# API reference: {info.get('title', 'API')} {info.get('version', '')}".rstrip(),
        "",
        "*Rendered at build time from `api_schema/openapi.json` (OpenAPI "
        f"{spec.get('openapi', '?')}), the document the coordinator serves at `/openapi.json`; "
        "`nevis openapi` rewrites it from the app and a test fails when it is stale.*",
        "",
    ]
    if info.get("description"):
        out += [info["description"].strip(), ""]
    out += ["## Routes", ""]
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                out += _operation(path, method, item[method])
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name, schema in schemas.items():
            out += _schema(name, schema)
    return "\n".join(out).rstrip() + "\n"


def render_file(path: Path = SPEC) -> str:
    return render(json.loads(path.read_text()))


# --- MkDocs event hooks ------------------------------------------------------------------


def _prune(nav: list[Any], docs_dir: Path) -> list[Any]:
    kept: list[Any] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            value = _prune(value, docs_dir)
            kept.append({next(iter(entry)): value} if isinstance(entry, dict) else value)
        elif isinstance(value, str) and value in OPTIONAL_PAGES and not (docs_dir / value).is_file():
            continue
        else:
            kept.append(entry)
    return kept


def on_config(config):  # noqa: ANN001, ANN201 (MkDocs' hook signature)
    if config.get("nav"):
        config["nav"] = _prune(config["nav"], Path(config["docs_dir"]))
    return config


def on_files(files, config):  # noqa: ANN001, ANN201
    from mkdocs.structure.files import File  # noqa: PLC0415

    files.append(File.generated(config, PAGE, content=render_file()))
    return files
