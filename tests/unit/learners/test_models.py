"""The two networks: sizes, output shapes, and rebuilding from a config."""

from __future__ import annotations

import pytest
import torch

from services.core.errors import UnknownNameError
from workers.learners.models import (
    FeatureView,
    LowResResNet34,
    ModelConfig,
    build_model,
    count_parameters,
)


@pytest.fixture(scope="module")
def resnet() -> LowResResNet34:
    return build_model(ModelConfig("resnet34", 10)).eval()


def test_resnet34_has_about_21m_parameters(resnet):
    assert 21_000_000 < count_parameters(resnet) < 21_600_000


def test_resnet34_stem_is_3x3_stride_1_without_max_pool(resnet):
    conv = resnet.stem[0]
    assert conv.kernel_size == (3, 3) and conv.stride == (1, 1)
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in resnet.modules())


@pytest.mark.parametrize("size", [32, 64])
def test_resnet34_logits_and_features_at_low_resolution(resnet, size):
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        assert resnet(x).shape == (2, 10)
        assert resnet.features(x).shape == (2, 512)


def test_small_cnn_is_small_and_shapes_are_right():
    model = build_model(ModelConfig("small_cnn", 7)).eval()
    assert 100_000 < count_parameters(model) < 300_000
    for size in (32, 64):
        x = torch.randn(3, 3, size, size)
        with torch.no_grad():
            assert model(x).shape == (3, 7)
            assert FeatureView(model)(x).shape == (3, model.feature_dim) == (3, 128)


def test_width_scales_the_network():
    narrow = build_model(ModelConfig("small_cnn", 10, width=8))
    assert narrow.feature_dim == 32
    assert count_parameters(narrow) < 20_000


def test_model_config_rejects_unknown_names_with_a_suggestion():
    with pytest.raises(UnknownNameError, match="Did you mean 'resnet34'"):
        ModelConfig("resnet43", 10)
    with pytest.raises(ValueError, match="num_classes"):
        ModelConfig("small_cnn", 0)
