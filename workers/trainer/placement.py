"""Whether a learner's trials can be placed on the cluster as it is, decided before a run starts.

Ray waits for resources without a deadline: a trial whose bundles no node can hold would sit
pending for ever (a two-worker learner on a 2-CPU machine beside Tune's own driver did, for
more than 10 minutes, saying nothing). So the runner checks a trial's ask against the alive
nodes' totals first (``ray.nodes()``) and refuses, naming what the trial asked and what the
largest node has. Sandboxed ranks (and one-worker trials) are one bundle, so one node must
hold all of it; a trusted Ray Train group is Tune's driver plus one bundle per worker, which
may spread over nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from services.core.errors import LearnerError
from workers.learners.protocol import Resources

TRAIN_DRIVER_CPU = 0.01  # the Tune trial that drives a Ray Train group (task_job.trial_resources)


@dataclass(frozen=True)
class NodeSize:
    """What one alive node has in all (not what is free now)."""

    cpus: float
    gpus: float


def node_sizes(nodes: Iterable[Mapping[str, Any]]) -> list[NodeSize]:
    """The alive nodes of ``ray.nodes()``, largest first."""
    sizes = [
        NodeSize(float(n.get("Resources", {}).get("CPU", 0.0)), float(n.get("Resources", {}).get("GPU", 0.0)))
        for n in nodes
        if n.get("Alive")
    ]
    return sorted(sizes, key=lambda s: (s.gpus, s.cpus), reverse=True)


def trial_bundles(resources: Resources, *, ranks_here: bool) -> list[tuple[float, float]]:
    """The (CPU, GPU) bundles one trial reserves."""
    workers, cpus, gpus = resources.num_workers, resources.cpus_per_worker, resources.gpus_per_worker
    if workers == 1 or ranks_here:
        return [(workers * cpus, workers * gpus)]
    return [(TRAIN_DRIVER_CPU, 0.0), *[(cpus, gpus)] * workers]


def placement_refusal(resources: Resources, nodes: Iterable[Mapping[str, Any]], *, ranks_here: bool) -> str | None:
    """Why one trial of ``resources`` cannot be placed on these nodes, or ``None``."""
    sizes = node_sizes(nodes)
    free = [[s.cpus, s.gpus] for s in sizes]
    for cpus, gpus in sorted(trial_bundles(resources, ranks_here=ranks_here), reverse=True):
        room = next((f for f in free if f[0] + 1e-9 >= cpus and f[1] + 1e-9 >= gpus), None)
        if room is None:
            break
        room[0], room[1] = room[0] - cpus, room[1] - gpus
    else:
        return None
    w = resources
    asked = (
        f"{w.num_workers} worker(s) x {w.cpus_per_worker:g} CPU, {w.gpus_per_worker:g} GPU per trial"
        + (" on one node (its ranks share one private network)" if ranks_here and w.num_workers > 1 else "")
        + ("" if ranks_here or w.num_workers == 1 else f", plus {TRAIN_DRIVER_CPU:g} CPU for Tune's driver")
    )
    largest = (
        f"the largest node has {sizes[0].cpus:g} CPUs and {sizes[0].gpus:g} GPUs ({len(sizes)} alive)"
        if sizes
        else "the cluster has no alive node"
    )
    return f"asks for {asked}, which this cluster cannot place: {largest}; declare fewer or smaller workers"


def check_placement(resources: Resources, nodes: Iterable[Mapping[str, Any]], *, ranks_here: bool, spec: str) -> None:
    """Refuse a learner whose trials cannot be placed (:func:`placement_refusal`).

    Raises:
        LearnerError: naming the learner, its ask and the largest node.
    """
    refusal = placement_refusal(resources, nodes, ranks_here=ranks_here)
    if refusal is not None:
        raise LearnerError(f"Learner {spec!r} {refusal}.")


def check_placement_here(resources: Resources, *, sandbox: str, spec: str) -> None:
    """:func:`check_placement` on the connected Ray cluster (nothing when Ray is not up), with
    the ask as the runner will make it there (an optional GPU dropped where there is none)."""
    import ray  # noqa: PLC0415

    from workers.trainer.learner_nodes import learner_nodes  # noqa: PLC0415
    from workers.trainer.rank_trial import sandboxed_ranks  # noqa: PLC0415
    from workers.trainer.task_job import fit_to_cluster  # noqa: PLC0415

    if ray.is_initialized():
        check_placement(
            fit_to_cluster(resources, ray.cluster_resources()),
            learner_nodes(ray.nodes()),  # where learner code may run (NEVIS_LEARNER_NODE_RESOURCE)
            ranks_here=sandboxed_ranks(resources, sandbox),
            spec=spec,
        )


__all__ = ["NodeSize", "check_placement", "check_placement_here", "node_sizes", "placement_refusal", "trial_bundles"]
