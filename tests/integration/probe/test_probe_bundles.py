"""The probe pool runs an uploaded learner the way the worker harness does: from its stored
bundle, unpacked by the pool and shown read-only to a sandboxed host (never via PYTHONPATH)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from services.core.errors import ProbeInputError
from services.store.objects import LocalObjectStore
from workers.probe.runtime.probe_runtime import ProbeRuntime
from workers.sandbox.learner_calls import describe

FIXTURES = Path(__file__).resolve().parents[1] / "learner_fixtures" / "nevis_test_learners.py"


@pytest.fixture
def stored_bundle(tmp_path):
    archive = tmp_path / "nevis_test_learners-0.1.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURES, arcname="nevis_test_learners-0.1/nevis_test_learners.py")
    store = LocalObjectStore(tmp_path / "store")
    info = store.put_file(f"learners/bundles/x/{archive.name}", archive)
    return store, info


def test_an_uploaded_learner_is_probed_from_its_bundle(tmp_path, stored_bundle):
    store, info = stored_bundle
    runtime = ProbeRuntime(None, store, bundles_dir=tmp_path / "bundles")
    try:
        learner = runtime.learner("nevis_test_learners:nearest_mean", bundle=(info.key, info.sha256))
        assert describe(learner.host).name  # the host imported it from the unpacked bundle
        assert (tmp_path / "bundles" / info.sha256 / "nevis_test_learners-0.1" / "nevis_test_learners.py").is_file()
        again = runtime.learner("nevis_test_learners:nearest_mean", bundle=(info.key, info.sha256))
        assert again is learner  # one warm host per learner and bundle
    finally:
        runtime.close()


def test_without_a_bundles_folder_the_job_says_what_is_missing(stored_bundle):
    store, info = stored_bundle
    runtime = ProbeRuntime(None, store)
    with pytest.raises(ProbeInputError, match="no folder to unpack learner bundles"):
        runtime.learner("nevis_test_learners:nearest_mean", bundle=(info.key, info.sha256))


def test_a_tampered_stored_bundle_is_refused(tmp_path, stored_bundle):
    store, info = stored_bundle
    runtime = ProbeRuntime(None, store, bundles_dir=tmp_path / "bundles")
    with pytest.raises(ProbeInputError, match="Cannot load learner.*not the one registered"):
        runtime.learner("nevis_test_learners:nearest_mean", bundle=(info.key, "0" * 64))
