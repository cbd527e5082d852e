"""Which Ray nodes run learner code: those advertising ``NEVIS_LEARNER_NODE_RESOURCE``.

On a cluster the head holds the harness's credentials (the run's harness actor is pinned to
the driver's node, :class:`~workers.trainer.run_actors.RunActors`), so learner code belongs
on other nodes. An operator starts those with a custom resource (``ray start --resources
'{"nevis_learner": 1}'``) and sets ``NEVIS_LEARNER_NODE_RESOURCE=nevis_learner`` where the
worker harness runs; every actor that starts learner hosts (trial executors, evaluators, the
trial that starts sandboxed ranks) and every trial's CPU reservation then asks for a small
share of it, so Ray can place them on those nodes only. Unset (the default, and a one-node
machine): no ask, learner actors go wherever Ray puts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SHARE = 0.001
"""What one learner actor or reservation asks of the resource: a node advertising 1 takes 1,000."""


def configured() -> str | None:
    """The resource name this process's settings name, if any."""
    from services.core.config import get_settings  # noqa: PLC0415 - settings are read where they apply

    return get_settings().learner_node_resource or None


def learner_ask(resource: str | None = None) -> dict[str, float]:
    """The custom resources a learner actor or reservation asks for (``{}`` when none is set)."""
    name = configured() if resource is None else resource
    return {name: SHARE} if name else {}


def actor_options(resource: str | None = None) -> dict[str, Any]:
    """``.options(...)`` keywords that place a learner actor on a learner node."""
    ask = learner_ask(resource)
    return {"resources": ask} if ask else {}


def learner_nodes(nodes: Iterable[Mapping[str, Any]], resource: str | None = None) -> list[Mapping[str, Any]]:
    """The ``ray.nodes()`` rows learner code may run on: those with the resource, or all."""
    name = configured() if resource is None else resource
    rows = list(nodes)
    return [n for n in rows if name in (n.get("Resources") or {})] if name else rows


__all__ = ["SHARE", "actor_options", "configured", "learner_ask", "learner_nodes"]
