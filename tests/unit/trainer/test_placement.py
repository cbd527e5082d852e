"""A trial that no node of the cluster can hold is refused before it starts, naming its ask
and the largest node (nodes as ``ray.nodes()`` lists them)."""

from __future__ import annotations

import pytest

from services.core.errors import LearnerError
from workers.learners.protocol import Resources
from workers.trainer.placement import check_placement, placement_refusal


def _node(cpus: float, gpus: float = 0.0, *, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": cpus, "GPU": gpus, "memory": 1e9}}


def test_sandboxed_ranks_must_fit_one_node_even_where_the_cluster_has_room_in_all():
    two = Resources(num_workers=2, cpus_per_worker=2)
    nodes = [_node(2), _node(2), _node(8, alive=False)]  # 4 CPUs alive, but 2 per node
    refusal = placement_refusal(two, nodes, ranks_here=True)
    assert refusal is not None
    assert "2 worker(s) x 2 CPU, 0 GPU per trial on one node" in refusal
    assert "the largest node has 2 CPUs and 0 GPUs (2 alive)" in refusal
    assert placement_refusal(two, [_node(2), _node(4)], ranks_here=True) is None
    # a trusted Ray Train group spreads its workers over nodes
    assert placement_refusal(two, [_node(2.5), _node(2)], ranks_here=False) is None


def test_a_train_group_beside_its_driver_on_a_two_cpu_machine_is_refused_not_left_waiting():
    """Issue 46's hang: two 1-CPU workers and Tune's driver on a 2-CPU machine."""
    with pytest.raises(LearnerError, match=r"'mine:two'.*plus 0.01 CPU for Tune's driver.*largest node has 2 CPUs"):
        check_placement(Resources(num_workers=2), [_node(2)], ranks_here=False, spec="mine:two")


def test_gpus_are_counted_per_node():
    gpu_ranks = Resources(num_workers=4, cpus_per_worker=1, gpus_per_worker=1)
    assert "largest node has 16 CPUs and 2 GPUs" in placement_refusal(
        gpu_ranks, [_node(16, 2), _node(8, 2)], ranks_here=True
    )
    assert placement_refusal(gpu_ranks, [_node(16, 8)], ranks_here=True) is None
    assert "no alive node" in placement_refusal(Resources(), [], ranks_here=False)
