"""The trust rule on the resolved sandbox, and a learner's ask held to its registration."""

from __future__ import annotations

import shutil

import pytest

from services.core.errors import LearnerError
from workers.learners.protocol import Resources
from workers.sandbox.trust import bounded_by_registration, multi_worker_refusal


def test_one_worker_is_never_refused():
    for sandbox in ("auto", "bwrap", "none"):
        assert multi_worker_refusal(1, sandbox=sandbox, submitted=True) is None


def test_auto_binds_as_bwrap_where_bubblewrap_is_installed():
    """Under bubblewrap every rank runs in a learner host (workers/trainer/rank_trial.py): uploads too."""
    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    for submitted in (True, False):
        assert multi_worker_refusal(2, sandbox="auto", submitted=submitted) is None
    assert multi_worker_refusal(2, sandbox="none", submitted=False) is None  # your own code, unsandboxed


def test_an_upload_never_gets_unsandboxed_workers():
    refusal = multi_worker_refusal(2, sandbox="none", submitted=True)
    assert "no uploaded bundle or image" in refusal and "NEVIS_SANDBOX=none" in refusal


def test_a_declaration_over_the_registration_is_refused_naming_both():
    with pytest.raises(LearnerError, match=r"declares 4 CPUs and 0 GPUs.*allows \(2 CPUs, 0 GPUs\)"):
        bounded_by_registration(Resources(cpus_per_worker=4.0), {"cpus": 2, "gpus": 0}, spec="m:f")
    with pytest.raises(LearnerError, match="1 GPUs per trial"):
        bounded_by_registration(Resources(gpus_per_worker=1.0), {"cpus": 2, "gpus": 0}, spec="m:f")


def test_an_optional_gpu_over_the_registration_is_dropped_and_the_rest_kept():
    asked = Resources(cpus_per_worker=1.0, gpus_per_worker=1.0, gpu_optional=True)
    assert bounded_by_registration(asked, {"cpus": 1, "gpus": 0}, spec="m:f").gpus_per_worker == 0.0
    assert bounded_by_registration(asked, {"cpus": 1, "gpus": 1}, spec="m:f") == asked
    assert bounded_by_registration(asked, None, spec="m:f") == asked  # the installation's own learner
