"""Inference copies of loaded networks: the same outputs, the same FLOPs, never stale weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from workers.learners.augment import eval_transform
from workers.learners.indep import IndepLearner
from workers.learners.inference import InferenceTwin, channels_last_suits, fold_batch_norms
from workers.learners.models import FeatureView, LowResResNet34, LowResVGG, SmallCNN
from workers.sandbox.joint_pass import features_and_scores

from .conftest import RecordingContext, make_view


def _trained_statistics(model: nn.Module) -> nn.Module:
    """Batch norms with non-trivial running statistics and affine weights (as after training)."""
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen))
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.num_features, generator=gen))
                m.bias.copy_(torch.randn(m.num_features, generator=gen))
    return model.eval()


@pytest.mark.parametrize(
    ("factory", "wide"),
    [
        (lambda: SmallCNN(7, width=8), False),
        (lambda: SmallCNN(7, width=16), True),
        (lambda: LowResResNet34(7, width=4), False),
        (lambda: LowResResNet34(7, width=16), True),
        (lambda: LowResVGG(7, width=4), False),
    ],
)
def test_the_copy_computes_the_same_function_with_every_batch_norm_folded(factory, wide):
    model = _trained_statistics(factory())
    norms_before = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    twin = InferenceTwin(model, FeatureView).get(model)
    assert twin.channels_last is wide is channels_last_suits(model)  # narrow layers: plain layout
    with torch.no_grad():
        expected = model(x)
        got = twin.model(twin.input(x))
    assert not any(isinstance(m, nn.BatchNorm2d) for m in twin.model.modules())
    conv = next(m for m in twin.model.modules() if isinstance(m, nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last if wide else torch.contiguous_format)
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == norms_before > 0  # untouched
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_a_batch_norm_in_training_mode_is_not_folded():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4, track_running_stats=False))
    fold_batch_norms(model)
    assert isinstance(model[1], nn.BatchNorm2d)


def _loaded(digits, ctx):
    learner = IndepLearner("small_cnn")
    view = make_view(digits.info, digits.train, digits.test)
    trained = learner.train(view, None, {"learning_rate": 0.05}, RecordingContext(seed=0, steps=3)).predictor
    return learner, trained, learner.load_predictor(learner.save_predictor(trained), digits.info, ctx)


def test_a_loaded_predictor_predicts_and_extracts_as_the_trained_one_at_the_same_flops(digits):
    images = digits.test.images[:40]
    plain_ctx, loaded_ctx = RecordingContext(seed=0), RecordingContext(seed=0)
    learner, trained, loaded = _loaded(digits, loaded_ctx)
    plain = (learner.predict(trained, images, plain_ctx), learner.features(trained, images, plain_ctx))
    before = loaded_ctx.meter.measured
    fast = (learner.predict(loaded, images, loaded_ctx), learner.features(loaded, images, loaded_ctx))
    assert id(loaded.twin.get(loaded.model).model) in loaded_ctx.meter._tracked  # the copy ran, tracked
    for a, b in zip(plain, fast):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    assert loaded_ctx.meter.measured - before == plain_ctx.meter.measured > 0


def test_a_loaded_network_trained_afterwards_runs_as_itself(digits):
    ctx = RecordingContext(seed=0)
    learner, _, loaded = _loaded(digits, ctx)
    images = digits.test.images[:8]
    learner.predict(loaded, images, ctx)  # the copy is built from the loaded weights
    with torch.no_grad():
        loaded.model.head.bias.add_(5.0)  # what an optimizer step does: an in-place change
    assert loaded.twin.get(loaded.model) is None
    np.testing.assert_allclose(
        learner.predict(loaded, images, ctx), _eager_scores(learner, loaded, images), rtol=1e-5, atol=1e-5
    )


def _eager_scores(learner, predictor, images):
    """The network's own scores (no copy), as ``_run`` computes them."""
    with torch.no_grad():
        return predictor.model.eval()(eval_transform(images, predictor.augment, device="cpu")).numpy()


def test_the_twin_keeps_one_view_for_its_copy():
    model = _trained_statistics(SmallCNN(3, width=4))
    twin = InferenceTwin(model, FeatureView)
    first, second = twin.get(model), twin.get(model)
    assert first is second and first.view.model is first.model
    assert twin.get(SmallCNN(3, width=4)) is None  # another network: never the loaded one's copy


def test_one_pass_gives_the_features_and_the_scores_of_predict_for_fewer_flops(digits):
    images = digits.test.images[:40]
    two_ctx, one_ctx = RecordingContext(seed=0), RecordingContext(seed=0)
    learner, _, loaded = _loaded(digits, two_ctx)
    start = two_ctx.meter.measured
    expected = (learner.features(loaded, images, two_ctx), learner.predict(loaded, images, two_ctx))
    two_passes = two_ctx.meter.measured - start
    features, scores = learner.features_and_predict(loaded, images, one_ctx)
    np.testing.assert_allclose(features, expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(scores, expected[1], rtol=1e-5, atol=1e-5)
    assert 0 < one_ctx.meter.measured < two_passes


class _TwoCalls:
    """A learner without the one-pass hook: asked for features, then for scores."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def features(self, predictor, images, ctx):
        self.calls.append("features")
        return np.ones((len(images), 3), np.float32)

    def predict(self, predictor, images, ctx):
        self.calls.append("predict")
        return np.zeros((len(images), 2), np.float32)


def test_a_learner_without_the_hook_is_asked_twice():
    learner = _TwoCalls()
    features, scores = features_and_scores(learner, None, np.zeros((4, 8, 8, 3), np.uint8), None)
    assert learner.calls == ["features", "predict"] and features.shape == (4, 3) and scores.shape == (4, 2)
