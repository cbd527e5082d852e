"""Learner actors ask for a share of the learner nodes' resource, and placement looks only there."""

from __future__ import annotations

from workers.learners.protocol import Resources
from workers.trainer.learner_nodes import SHARE, actor_options, learner_ask, learner_nodes
from workers.trainer.placement import placement_refusal

HEAD = {"Alive": True, "Resources": {"CPU": 8.0}}
LEARNER = {"Alive": True, "Resources": {"CPU": 2.0, "nevis_learner": 1.0}}


def test_the_ask_names_the_resource_only_where_one_is_set():
    assert learner_ask("nevis_learner") == {"nevis_learner": SHARE}
    assert actor_options("nevis_learner") == {"resources": {"nevis_learner": SHARE}}
    assert learner_ask("") == {} and actor_options("") == {}


def test_placement_is_judged_on_the_learner_nodes_not_the_head():
    nodes = learner_nodes([HEAD, LEARNER], "nevis_learner")
    assert nodes == [LEARNER] and learner_nodes([HEAD, LEARNER], "") == [HEAD, LEARNER]
    four = Resources(num_workers=2, cpus_per_worker=2.0)
    assert placement_refusal(four, [HEAD, LEARNER], ranks_here=True) is None  # the head could hold it
    refusal = placement_refusal(four, nodes, ranks_here=True)  # but learner code may not run there
    assert refusal is not None and "the largest node has 2 CPUs" in refusal
