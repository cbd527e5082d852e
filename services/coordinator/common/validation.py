"""Strict checks of what clients send: names, image references, entry points, resources.

Pure functions; each raises :class:`InvalidInputError` naming the field and saying what
would be accepted, in one message shape: "The 'field' ... must be .... Got X instead."
The value a message echoes is cut to :data:`ECHO_MAX` characters (:func:`shown`), so a
hostile megabyte never comes back in an error.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from services.coordinator.common.client_errors import InvalidInputError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# The Docker distribution reference grammar (distribution/reference), written out.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")
CODE_URL_MAX = 500  # as the column (services.store.db.models.CODE_URL_MAX)
_HOST = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)

DB_INT_MAX = 2**31 - 1
"""The largest value of an INTEGER column (32-bit on PostgreSQL): ids, counts, quotas."""
ECHO_MAX = 200
"""At most this many characters of a client's value are echoed in an error message."""
FORBIDDEN_ENTRYPOINT_MODULES = frozenset(
    {
        "os",
        "posix",
        "nt",
        "sys",
        "subprocess",
        "builtins",
        "shutil",
        "importlib",
        "pickle",
        "marshal",
        "shelve",
        "socket",
        "ctypes",
        "pty",
        "runpy",
        "code",
        "codeop",
        "signal",
        "multiprocessing",
    }
)
"""Standard-library packages an entry point may not start with: a learner is the factory
of a package of its own, never a process, file or import primitive of the interpreter."""


def shown(value: Any, limit: int = ECHO_MAX) -> str:
    """``repr(value)`` cut to ``limit`` characters (saying how long it was), for messages."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as text"
    return f"{text[:limit]}... ({size})"


def check_name(value: str, *, field: str = "name") -> str:
    """A learner or user name: letters, digits, '.', '_', '-'; 1-100 characters."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidInputError(
            f"The '{field}' must be 1-100 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit. Got {shown(value)} instead.",
            field=field,
        )
    return value


def check_image_ref(value: str, *, field: str = "image") -> str:
    """A pinned container image reference, e.g. ``ghcr.io/me/learner:1.2`` or ``...@sha256:...``.

    The tag ``latest`` (or no tag and no digest) is refused: a benchmark run must name the
    exact image it ran, so that it can be reproduced.
    """
    shape = "a container image reference such as 'ghcr.io/team/learner:1.0' or 'registry:5000/learner@sha256:<64 hex>'"
    if not isinstance(value, str) or not value or len(value) > 500:
        raise InvalidInputError(f"The '{field}' must be {shape}. Got {shown(value)} instead.", field=field)
    match = _IMAGE.fullmatch(value)
    if match is None:
        raise InvalidInputError(f"The '{field}' must be {shape}. Got {shown(value)} instead.", field=field)
    domain = match["domain"]
    # A domain that is no registry host (Docker's rule) is the first path component: lower case.
    path_like = domain and not ("." in domain or ":" in domain or domain == "localhost" or domain.startswith("["))
    if path_like and not re.fullmatch(_PATH_COMPONENT, domain):
        raise InvalidInputError(f"The '{field}' must be {shape}. Got {shown(value)} instead.", field=field)
    name = (domain + "/" if domain else "") + match["path"]
    if len(name) > 255:
        raise InvalidInputError(
            f"The '{field}' repository name must be at most 255 characters. Got {len(name)} instead.", field=field
        )
    if match["digest"] is None and match["tag"] in (None, "latest"):
        raise InvalidInputError(
            f"The '{field}' must be pinned with a tag other than 'latest' or a digest "
            f"(…@sha256:…), so the run can be reproduced. Got {shown(value)} instead.",
            field=field,
        )
    return value


@dataclass(frozen=True)
class ImagePolicy:
    """Which learner images this service runs: from ``registries`` only (registry hosts or
    host/path prefixes; empty: any), and by digest when ``require_digest`` (production: a tag
    can be moved to other code after review, a digest cannot)."""

    registries: tuple[str, ...] = ()
    require_digest: bool = False


def check_image_policy(value: str, policy: ImagePolicy, *, field: str = "image") -> str:
    """``value`` (already a valid reference, :func:`check_image_ref`) under ``policy``."""
    match = _IMAGE.fullmatch(value)
    if match is None:
        return check_image_ref(value, field=field)
    domain = match["domain"]
    if not domain or not ("." in domain or ":" in domain or domain == "localhost"):
        domain = "docker.io"  # Docker's default registry, as a runtime would resolve it
        path = (match["domain"] + "/" if match["domain"] else "") + match["path"]
    else:
        path = match["path"]
    name = f"{domain}/{path}"
    if policy.registries and not any(
        name == allowed.rstrip("/") or name.startswith(allowed.rstrip("/") + "/") for allowed in policy.registries
    ):
        raise InvalidInputError(
            f"The '{field}' must come from an allowed registry ({', '.join(policy.registries)}; "
            f"NEVIS_IMAGE_REGISTRIES). Got {shown(value)} (registry {domain!r}) instead.",
            field=field,
        )
    if policy.require_digest and match["digest"] is None:
        raise InvalidInputError(
            f"The '{field}' must be pinned by digest (…@sha256:<64 hex>) on this service "
            f"(NEVIS_REQUIRE_IMAGE_DIGEST): a tag can be moved. Got {shown(value)} instead.",
            field=field,
        )
    return value


def check_entrypoint(value: str, *, field: str = "entrypoint") -> str:
    """A ``package.module:factory`` spec made of Python identifiers.

    The package may not be one of :data:`FORBIDDEN_ENTRYPOINT_MODULES` (``os:system`` is no
    learner), and the factory's attribute path may not name a dunder (``make.__globals__``).
    """
    shape = "'package.module:factory' (Python identifiers, one colon)"
    if not isinstance(value, str) or len(value) > 500 or value.count(":") != 1:
        raise InvalidInputError(f"The '{field}' must be {shape}. Got {shown(value)} instead.", field=field)
    module, attr = value.split(":")
    parts = module.split(".") + attr.split(".")
    if not all(p.isidentifier() and p.isascii() and not keyword.iskeyword(p) for p in parts):
        raise InvalidInputError(f"The '{field}' must be {shape}. Got {shown(value)} instead.", field=field)
    top = module.split(".")[0]
    if top in FORBIDDEN_ENTRYPOINT_MODULES:
        raise InvalidInputError(
            f"The '{field}' must be {shape} of your own package, not of the standard-library "
            f"module {top!r}. Got {shown(value)} instead.",
            field=field,
        )
    if any(p.startswith("__") and p.endswith("__") for p in attr.split(".")):
        raise InvalidInputError(
            f"The '{field}' must be {shape} whose factory is no dunder attribute. Got {shown(value)} instead.",
            field=field,
        )
    return value


@dataclass(frozen=True)
class ResourceRequest:
    """What one task of a learner asks the cluster for."""

    cpus: float = 1.0
    gpus: int = 0
    memory_mb: int = 2048

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def stored(cls, resources: dict[str, Any] | None) -> ResourceRequest:
        """A learner row's stored resources as one task's request. A registration holds this
        form already; a learner first run by ``nevis run`` holds its declared per-trial form
        (``num_workers`` x ``cpus_per_worker`` / ``gpus_per_worker``), which needs its workers'
        CPUs and whole GPUs: a share of 0.25 per trial still needs one GPU on the job's node,
        where four such trials run side by side."""
        res = resources or {}
        if "gpus" in res or "cpus" in res or not ("gpus_per_worker" in res or "cpus_per_worker" in res):
            return cls(
                cpus=float(res.get("cpus", cls.cpus)),
                gpus=int(res.get("gpus", cls.gpus)),
                memory_mb=int(res.get("memory_mb", cls.memory_mb)),
            )
        workers = max(1, int(res.get("num_workers", 1)))
        return cls(
            cpus=workers * float(res.get("cpus_per_worker", 1.0)),
            gpus=math.ceil(workers * float(res.get("gpus_per_worker", 0.0)) - 1e-9),
            memory_mb=int(res.get("memory_mb", cls.memory_mb)),
        )


def check_resources(data: Any, *, field: str = "resources") -> ResourceRequest:
    """Validate a ``{"cpus", "gpus", "memory_mb"}`` mapping (missing keys take defaults)."""
    if data is None:
        return ResourceRequest()
    if not isinstance(data, dict):
        raise InvalidInputError(f"The '{field}' must be an object. Got {shown(data)} instead.", field=field)
    unknown = sorted(set(data) - {"cpus", "gpus", "memory_mb"})
    if unknown:
        raise InvalidInputError(
            f"The '{field}' may hold only cpus, gpus and memory_mb. Got {shown(', '.join(unknown))} instead.",
            field=f"{field}.{unknown[0]}",
        )
    out = ResourceRequest()
    cpus = data.get("cpus", out.cpus)
    if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not (math.isfinite(cpus) and 0 < cpus <= 512):
        raise InvalidInputError(
            f"The '{field}.cpus' must be a number in (0, 512]. Got {shown(cpus)} instead.", field=f"{field}.cpus"
        )
    gpus = _int_in(data.get("gpus", out.gpus), 0, 64, f"{field}.gpus")
    memory = _int_in(data.get("memory_mb", out.memory_mb), 64, 4 * 1024 * 1024, f"{field}.memory_mb")
    return ResourceRequest(cpus=float(cpus), gpus=gpus, memory_mb=memory)


def check_fits_node(
    request: ResourceRequest, *, node_cpus: float | None, node_gpus: int | None, field: str = "resources"
) -> ResourceRequest:
    """A learner's ranks run on one node: a registration asking for more CPUs or GPUs per task
    than the largest node has (``NEVIS_NODE_CPUS`` / ``NEVIS_NODE_GPUS``; unset: unchecked)
    could never start, so it is refused now, naming the node's size."""
    for name, asked, node in (("cpus", request.cpus, node_cpus), ("gpus", request.gpus, node_gpus)):
        if node is not None and asked > node:
            raise InvalidInputError(
                f"The '{field}.{name}' asks for {asked:g} per task, and a task's ranks run on one node: the "
                f"largest node of this cluster has {node_cpus if node_cpus is not None else '?'} CPUs and "
                f"{node_gpus if node_gpus is not None else '?'} GPUs. Ask for at most {node:g}.",
                field=f"{field}.{name}",
            )
    return request


def check_idempotency_key(value: str) -> str:
    """1-200 printable ASCII characters, no spaces."""
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise InvalidInputError(
            "The 'Idempotency-Key' header must be 1-200 printable ASCII characters without "
            f"spaces. Got {shown(value, 60)} instead.",
            field="Idempotency-Key",
        )
    return value


def check_code_url(value: str, *, field: str = "code_url") -> str:
    """Where a learner's code is public: an ``https://`` URL with a dotted host name, at most
    500 printable ASCII characters, without credentials; it is shown as a link on the
    leaderboard, so nothing else (no ``javascript:``, no ``http:``) is accepted."""
    problem = None
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= CODE_URL_MAX
        or not value.isascii()
        or any(not 0x21 <= ord(c) <= 0x7E for c in value)
    ):
        problem = f"at most {CODE_URL_MAX} printable ASCII characters without spaces"
    else:
        try:
            parts = urlsplit(value)
            host, port = parts.hostname, parts.port  # a port out of range is a ValueError
        except ValueError:  # e.g. an unclosed '[' of an IPv6 host
            parts, host, port = urlsplit("https://"), None, 0
        if not value.lower().startswith("https://") or parts.scheme != "https":
            problem = "an https:// URL"
        elif parts.username is not None or parts.password is not None:
            problem = "a URL without a user name or password"
        elif host is None or not _HOST.fullmatch(host) or port == 0:
            problem = "an https:// URL with a host name such as github.com (and a port in 1-65535, if any)"
    if problem:
        raise InvalidInputError(
            f"The '{field}' (where the learner's code is public) must be {problem}, e.g. "
            f"https://github.com/me/my-learner. Got {shown(value)} instead.",
            field=field,
        )
    return value


def parse_rate(text: str) -> list[Any]:
    """``"120/minute"`` or ``"120/minute;2000/hour"`` as rate limits (``limits`` items); a
    ValueError says what would be accepted."""
    from limits import parse_many  # noqa: PLC0415 - only settings and the rate limiter need it

    try:
        items = parse_many(text) if isinstance(text, str) and len(text) <= 200 else []
    except ValueError:
        items = []
    if not items:
        raise ValueError(
            "must be a rate such as '120/minute' or '120/minute;2000/hour' "
            f"(amount/second|minute|hour|day). Got {shown(text)} instead."
        )
    return items


def split_list(value: str) -> list[str]:
    """The items of a comma-separated setting, stripped, empty ones dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _int_in(value: Any, low: int, high: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(
            f"The '{field}' must be an int in [{low}, {high}]. Got {shown(value)} instead.", field=field
        )
    return value


__all__ = [
    "CODE_URL_MAX",
    "DB_INT_MAX",
    "ECHO_MAX",
    "FORBIDDEN_ENTRYPOINT_MODULES",
    "IDEMPOTENCY_KEY",
    "ImagePolicy",
    "ResourceRequest",
    "check_code_url",
    "check_entrypoint",
    "check_idempotency_key",
    "check_image_policy",
    "check_fits_node",
    "check_image_ref",
    "check_name",
    "check_resources",
    "parse_rate",
    "shown",
    "split_list",
]
