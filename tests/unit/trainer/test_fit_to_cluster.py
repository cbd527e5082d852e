"""An optional GPU ask follows the cluster; a required one never changes; both survive the
learner host's declaration round trip; a share of a GPU runs that many trials on each."""

from __future__ import annotations

import pytest

from services.core.errors import LearnerError
from workers.learners.protocol import Resources
from workers.sandbox.declaration import resources_from_json
from workers.trainer.task_job import default_concurrency, fit_to_cluster

OPTIONAL = Resources(num_workers=2, cpus_per_worker=3.0, gpus_per_worker=1.0, gpu_optional=True)
REQUIRED = Resources(gpus_per_worker=1.0)


def test_an_optional_gpu_is_dropped_on_a_cluster_without_gpus():
    assert fit_to_cluster(OPTIONAL, {"CPU": 16.0}) == Resources(
        num_workers=2, cpus_per_worker=3.0, gpus_per_worker=0.0, gpu_optional=True
    )
    assert fit_to_cluster(OPTIONAL, {"CPU": 16.0, "GPU": 0.0}).gpus_per_worker == 0.0


def test_an_optional_gpu_is_kept_where_the_cluster_has_one():
    assert fit_to_cluster(OPTIONAL, {"CPU": 16.0, "GPU": 1.0}) == OPTIONAL


def test_a_required_gpu_is_never_dropped():
    assert fit_to_cluster(REQUIRED, {"CPU": 16.0}) == REQUIRED


def test_gpu_optional_crosses_the_declaration_and_defaults_to_false():
    from dataclasses import asdict

    assert resources_from_json(asdict(OPTIONAL)) == OPTIONAL
    legacy = {"num_workers": 1, "cpus_per_worker": 1.0, "gpus_per_worker": 1.0}
    assert resources_from_json(legacy).gpu_optional is False
    with pytest.raises(LearnerError, match="gpu_optional must be a bool"):
        resources_from_json({**legacy, "gpu_optional": "yes"})


@pytest.mark.parametrize(
    ("resources", "cluster", "trials"),
    [
        (Resources(cpus_per_worker=1.0, gpus_per_worker=1.0), {"CPU": 16.0, "GPU": 1.0}, 1),
        (Resources(cpus_per_worker=1.0, gpus_per_worker=0.25), {"CPU": 16.0, "GPU": 1.0}, 4),
        (Resources(cpus_per_worker=1.0, gpus_per_worker=0.25), {"CPU": 16.0, "GPU": 2.0}, 8),
        (Resources(cpus_per_worker=1.0, gpus_per_worker=1 / 3), {"CPU": 16.0, "GPU": 1.0}, 3),
        (Resources(cpus_per_worker=1.0, gpus_per_worker=0.25), {"CPU": 2.0, "GPU": 1.0}, 2),  # the CPUs bind
        (Resources(cpus_per_worker=1.0), {"CPU": 2.0}, 2),
    ],
)
def test_trials_sharing_a_gpu_fit_that_many_to_each(resources, cluster, trials):
    assert default_concurrency(resources, cluster) == trials
