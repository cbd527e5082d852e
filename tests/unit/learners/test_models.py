"""The networks: sizes, output shapes, initialisation, and rebuilding from a config."""

from __future__ import annotations

import pytest
import torch

from services.core.errors import UnknownNameError
from workers.learners.models import FeatureView, LowResResNet34, ModelConfig, build_model, count_parameters


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


def _weighted(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]


@pytest.mark.parametrize("name", ["resnet34", "vgg"])
def test_paper_networks_start_as_haiku_defaults(resnet, name):
    """Truncated normal at 2σ with σ = 1/sqrt(fan_in), not rescaled; zero biases; every
    batch-norm scale 1 (Haiku zero-initialises only bottleneck blocks, which ResNet-34 has none of)."""
    model = resnet if name == "resnet34" else build_model(ModelConfig("vgg", 10))
    for m in _weighted(model):
        w = m.weight.detach()
        sigma = 1.0 / w[0].numel() ** 0.5
        assert w.abs().max() <= 2 * sigma + 1e-7
        if w.numel() >= 20_000:  # enough draws for the spread of a 2σ-truncated normal
            assert 0.84 < float(w.std()) / sigma < 0.92
        assert m.bias is None or not m.bias.any()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and all(bool((m.weight == 1).all() and (m.bias == 0).all()) for m in norms)


def test_small_cnn_keeps_pytorch_default_init():
    """Kaiming-uniform with a = sqrt(5): uniform within ±1/sqrt(fan_in), spread 0.58/sqrt(fan_in)."""
    model = build_model(ModelConfig("small_cnn", 10))
    w = model.body[6][0].weight.detach()
    sigma = 1.0 / w[0].numel() ** 0.5
    assert w.abs().max() <= sigma and 0.54 < float(w.std()) / sigma < 0.62


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
