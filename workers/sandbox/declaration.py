"""What harness code learns about a learner without importing it: its declaration.

The learner host answers ``describe`` with the learner's name, search space, resources,
initial state and whether it has a ``prepare_task`` hook; this module turns them into JSON and back, checking every field, so the
driver can build the Tune search and size its executors from data alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from services.core.errors import LearnerError
from workers.learners.protocol import Choice, LogUniform, Resources, SearchDomain, TaskInfo, Uniform

MAX_NAME = 200


@dataclass(frozen=True)
class LearnerDeclaration:
    """A learner as data: name, search space, resources per trial, initial state (opaque)."""

    name: str
    search_space: Mapping[str, SearchDomain]
    resources: Resources
    init_state: bytes  # pickled by the learner host; only ever unpickled there
    preferred_search: str | None = None  # the strategy a run uses unless it names one (BHPO: gp_ucb)
    prepares_task: bool = False  # has ``prepare_task``: the harness runs it once per task, else skips it

    def to_header(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "search_space": {k: domain_to_json(v) for k, v in self.search_space.items()},
            "resources": asdict(self.resources),
            "preferred_search": self.preferred_search,
            "prepares_task": self.prepares_task,
        }

    @classmethod
    def from_header(cls, header: Mapping[str, Any], init_state: bytes) -> LearnerDeclaration:
        name = header.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise LearnerError(f"A learner's name must be a non-empty string of at most {MAX_NAME} characters.")
        space = header.get("search_space")
        if not isinstance(space, dict):
            raise LearnerError("search_space() must return a mapping of names to domains.")
        preferred = header.get("preferred_search")
        if preferred is not None and (not isinstance(preferred, str) or not 0 < len(preferred) <= MAX_NAME):
            raise LearnerError("A learner's preferred_search must be the name of a search strategy.")
        prepares = header.get("prepares_task", False)
        if not isinstance(prepares, bool):
            raise LearnerError(f"A learner's prepares_task must be a bool; got {str(prepares)[:40]}.")
        return cls(
            name=name,
            search_space={str(k): domain_from_json(str(k), v) for k, v in space.items()},
            resources=resources_from_json(header.get("resources")),
            init_state=init_state,
            preferred_search=preferred,
            prepares_task=prepares,
        )


def domain_to_json(domain: SearchDomain) -> dict[str, Any]:
    if isinstance(domain, LogUniform):
        return {"kind": "loguniform", "low": float(domain.low), "high": float(domain.high)}
    if isinstance(domain, Uniform):
        return {"kind": "uniform", "low": float(domain.low), "high": float(domain.high)}
    if isinstance(domain, Choice):
        return {"kind": "choice", "values": list(domain.values)}
    raise LearnerError(
        f"Search space domains must be LogUniform, Uniform or Choice from workers.learners.protocol; "
        f"got {type(domain).__name__}."
    )


def domain_from_json(name: str, doc: Any) -> SearchDomain:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind in ("loguniform", "uniform"):
        low, high = doc.get("low"), doc.get("high")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (low, high)):
            raise LearnerError(f"Search space {name!r}: bounds must be finite numbers; got {low!r}, {high!r}.")
        return (LogUniform if kind == "loguniform" else Uniform)(float(low), float(high))
    if kind == "choice" and isinstance(doc.get("values"), list):
        return Choice(tuple(doc["values"]))
    raise LearnerError(f"Search space {name!r}: not a LogUniform, Uniform or Choice domain.")


def resources_from_json(doc: Any) -> Resources:
    if not isinstance(doc, dict):
        raise LearnerError("resources() must return a workers.learners.protocol.Resources.")
    workers, cpus, gpus = doc.get("num_workers"), doc.get("cpus_per_worker"), doc.get("gpus_per_worker")
    if not (isinstance(workers, int) and not isinstance(workers, bool) and 1 <= workers <= 1024):
        raise LearnerError(f"Resources.num_workers must be an int in [1, 1024]; got {workers!r}.")
    for label, value in (("cpus_per_worker", cpus), ("gpus_per_worker", gpus)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1024):
            raise LearnerError(f"Resources.{label} must be a number in [0, 1024]; got {value!r}.")
    optional = doc.get("gpu_optional", False)
    if not isinstance(optional, bool):
        raise LearnerError(f"Resources.gpu_optional must be a bool; got {optional!r}.")
    return Resources(
        num_workers=workers, cpus_per_worker=float(cpus), gpus_per_worker=float(gpus), gpu_optional=optional
    )


def info_to_json(info: TaskInfo) -> dict[str, Any]:
    return {**asdict(info), "class_names": list(info.class_names)}


def info_from_json(doc: Mapping[str, Any]) -> TaskInfo:
    return TaskInfo(**{**doc, "class_names": tuple(doc["class_names"])})


__all__ = [
    "LearnerDeclaration",
    "domain_from_json",
    "domain_to_json",
    "info_from_json",
    "info_to_json",
    "resources_from_json",
]
