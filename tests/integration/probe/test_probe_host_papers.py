"""Through a real learner host (issue 22, item 6): LiDAR's views cut from the stored originals,
and a transfer learner's fresh start for OFM, then scored. Seconds: a small CNN, a few images."""

from __future__ import annotations

import numpy as np
import pytest

from services.store.probes.settings import ProbeSettings
from workers.learners.finetune import FtPrevLearner
from workers.learners.indep import IndepLearner
from workers.probe.runtime.context import ProbeContext
from workers.probe.runtime.data import TaskSamples
from workers.probe.runtime.features import augmented_features
from workers.probe.runtime.fresh_start import fresh_features
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.learner_calls import SandboxedLearner
from workers.stream.task_info import Originals, TaskInfo

INFO = TaskInfo(
    order=2,
    key="t",
    dataset="t",
    title="t",
    year=2000,
    domain=None,
    kind="single",
    num_classes=2,
    class_names=("a", "b"),
    image_size=16,
    num_train=0,
    num_dev=0,
)


def _predictor_bytes(learner: IndepLearner) -> bytes:
    return learner.save_predictor(learner._new_predictor(INFO, ProbeContext(seed=0)))


def _task(n: int = 6) -> TaskSamples:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (n, 16, 16, 3)).astype(np.uint8)
    canvas = np.full((n, 24, 20, 3), 255, dtype=np.uint8)  # padding never to be read
    canvas[:, :24, :18] = rng.integers(0, 255, (n, 24, 18, 3))
    originals = Originals(canvas, np.full((n, 2), (24, 18), dtype=np.int32))
    return TaskSamples(
        order=2,
        kind="single",
        num_classes=2,
        probe_images=images,
        probe_labels=np.arange(n) % 2,
        lidar_images=images,
        info=INFO,
        lidar_originals=originals,
    )


@pytest.mark.parametrize("spec", ["ft_prev_small"])
def test_a_hosted_transfer_learner_gives_views_from_originals_and_a_fresh_start(spec: str) -> None:
    task, ctx = _task(), ProbeContext(seed=0)
    with LearnerHost(HostSpec(spec)) as host:
        learner = SandboxedLearner(host)
        predictor = learner.load_predictor(_predictor_bytes(FtPrevLearner("small_cnn")), INFO, ctx)
        views, source = augmented_features(
            learner, predictor, task.lidar_images, 3, ctx, seed=0, originals=task.lidar_originals
        )
        assert views.shape[:2] == (6, 3) and "stored originals" in source
        fresh, what = fresh_features(learner, predictor, [task], ctx, seed=0)
        assert fresh is not None and "fresh small_cnn" in what
        own = learner.features(predictor, task.probe_images, ctx)
        assert fresh[2].features.shape == own.shape and not np.allclose(fresh[2].features, own)
    assert ctx.flops.total > 0  # the fresh network's passes are analysis FLOPs too
    with LearnerHost(HostSpec("indep_small")) as host:
        learner = SandboxedLearner(host)
        predictor = learner.load_predictor(_predictor_bytes(IndepLearner("small_cnn")), INFO, ctx)
        assert fresh_features(learner, predictor, [task], ctx, seed=0)[0] is None  # step 0 is untrained
    assert ProbeSettings.publish().ofm_fresh_start
