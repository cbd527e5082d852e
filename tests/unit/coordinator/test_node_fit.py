"""A learner registered for more than the largest node holds is refused at registration,
naming the node's size: its ranks run on one node, so it could never start."""

from __future__ import annotations

import pytest

from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.validation import ResourceRequest, check_fits_node, check_resources


def test_more_cpus_or_gpus_than_the_largest_node_is_refused_naming_it() -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"'resources.cpus' asks for 32 per task.*largest node of this "
        r"cluster has 16.0 CPUs and 2 GPUs\. Ask for at most 16",
    ):
        check_fits_node(check_resources({"cpus": 32}), node_cpus=16.0, node_gpus=2)
    with pytest.raises(InvalidInputError, match=r"'resources.gpus' asks for 4 per task.*has 16.0 CPUs and 2 GPUs"):
        check_fits_node(check_resources({"cpus": 8, "gpus": 4}), node_cpus=16.0, node_gpus=2)


def test_a_request_that_fits_or_an_unset_node_size_passes() -> None:
    fits = ResourceRequest(cpus=16.0, gpus=2)
    assert check_fits_node(fits, node_cpus=16.0, node_gpus=2) == fits
    assert check_fits_node(ResourceRequest(cpus=512.0, gpus=64), node_cpus=None, node_gpus=None).cpus == 512.0


def test_the_node_size_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.coordinator.common.config import CoordinatorSettings

    monkeypatch.setenv("NEVIS_NODE_CPUS", "8")
    monkeypatch.setenv("NEVIS_NODE_GPUS", "1")
    settings = CoordinatorSettings()
    assert (settings.node_cpus, settings.node_gpus) == (8.0, 1)
