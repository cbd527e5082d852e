"""Search strategies and trial schedulers by name: the one place each name is declared.

The budget (:mod:`services.core.budget`) refuses a name that is not here before anything
runs, and the API's schema lists these names; the factories themselves live with the trainer
(:mod:`workers.trainer.searchers`) and are entered :func:`~services.core.registry.lazy`, so
this bottom layer names them without importing Ray Tune or anything of ``workers``. Adding a
strategy is its factory in the trainer plus one ``register`` line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.core.registry import Registry, lazy

SEARCHERS: Registry[Callable[..., Any]] = Registry("search strategy")
"""Strategy name → factory of a ``SearchPlan``; ``random`` is the default."""

SCHEDULERS: Registry[Callable[..., Any]] = Registry("trial scheduler")
"""Scheduler name → factory of the harness's stopping rule; ``fifo`` (none) is the default."""

SEARCHERS.register("random", lazy("workers.trainer.searchers:random_search"))
SEARCHERS.register("gp_ucb", lazy("workers.trainer.searchers:gp_ucb_search"))
SCHEDULERS.register("fifo", lazy("workers.trainer.searchers:fifo"))
SCHEDULERS.register("asha", lazy("workers.trainer.searchers:asha"))
SCHEDULERS.register("proxy", lazy("workers.trainer.proxy_scheduler:proxy"))

__all__ = ["SCHEDULERS", "SEARCHERS"]
