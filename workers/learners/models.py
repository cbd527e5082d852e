"""Networks of the built-in learners: a small CNN for CPUs, the paper's low-res ResNet-34 and
the VGG that BHPO may pick instead.

Every network here is a :class:`Classifier`: ``features(x)`` gives the penultimate
representation (after global average pooling, shape (N, d)) and ``forward(x)`` gives logits
``head(features(x))``. A network is fully described by a :class:`ModelConfig`, which is what
a saved predictor stores beside its weights, so it can be rebuilt in another process.

The paper's networks (ResNet-34, VGG) start as the reference's do (:func:`init_as_haiku`):
dm_nevis builds them from Haiku modules left at their default initialisers
(``experiments_jax/training/resnet.py``, ``modules.py``; dm-haiku 0.0.8 as pinned in
``experiments_jax/requirements.txt``). The small CNN, this project's own, keeps PyTorch's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from services.core.errors import UnknownNameError, unknown_name_message


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a network (its weights travel separately).

    Attributes:
        name: a key of :data:`MODELS` ("small_cnn" or "resnet34").
        num_classes: size of the linear head.
        width: channels of the first stage; ``None`` takes the model's default.
    """

    name: str
    num_classes: int
    width: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MODELS:
            raise UnknownNameError(unknown_name_message("model", self.name, MODELS))
        if not isinstance(self.num_classes, int) or self.num_classes < 1:
            raise ValueError(
                "The 'num_classes' parameter of ModelConfig must be an int in [1, inf). "
                f"Got {self.num_classes!r} instead."
            )
        if self.width is not None and (not isinstance(self.width, int) or self.width < 1):
            raise ValueError(
                f"The 'width' parameter of ModelConfig must be None or an int in [1, inf). Got {self.width!r} instead."
            )


class Classifier(nn.Module):
    """A backbone ending in global pooling, then a linear head."""

    head: nn.Linear

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate features, shape (N, feature_dim)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    @property
    def feature_dim(self) -> int:
        return int(self.head.in_features)


class FeatureView(nn.Module):
    """Calls ``model.features`` through ``forward``, so hooks on this module see it.

    FLOP accounting hooks a module's ``__call__``; the representation pass of a predictor
    goes through this view (tracked on its own) rather than a bare method call.
    """

    def __init__(self, model: Classifier) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)


def init_as_haiku(model: nn.Module) -> None:
    """Re-initialise ``model`` in place as Haiku's defaults would, which the reference relies on.

    Conv and linear weights: a normal of standard deviation 1/sqrt(fan_in) truncated at two
    standard deviations and not rescaled afterwards (so the actual spread is ~0.88/sqrt(fan_in);
    ``hk.initializers.TruncatedNormal`` as ``hk.Conv2D`` and ``hk.Linear`` pick it when no
    ``w_init`` is given). Biases 0; batch-norm scale 1 and offset 0. No residual branch starts
    at zero: ``hk.nets.ResNet.BlockV1`` zero-initialises only a bottleneck block's last
    batch-norm scale, and ResNet-34's basic blocks have none.
    """
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            std = 1.0 / m.weight[0].numel() ** 0.5  # fan_in: input channels x kernel area
            nn.init.trunc_normal_(m.weight, std=std, a=-2.0 * std, b=2.0 * std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def _conv_bn_relu(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)
    )


class SmallCNN(Classifier):
    """Four conv-BN-ReLU blocks, max-pooling between them, global average pooling.

    With the default width 32 the stages have 32, 64, 128 and 128 channels (~240k
    parameters): enough to learn low-resolution tasks, small enough for 2 CPU cores.
    """

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        w = width
        self.body = nn.Sequential(
            _conv_bn_relu(3, w),
            nn.MaxPool2d(2),
            _conv_bn_relu(w, 2 * w),
            nn.MaxPool2d(2),
            _conv_bn_relu(2 * w, 4 * w),
            nn.MaxPool2d(2),
            _conv_bn_relu(4 * w, 4 * w),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * w, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class BasicBlock(nn.Module):
    """The two-conv residual block of ResNet-18/34, with a 1x1 projection when shapes change."""

    BATCH_NORM_FOLDS = (("conv1", "bn1"), ("conv2", "bn2"))  # for inference copies (inference.py)

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class LowResResNet34(Classifier):
    """ResNet-34 for 32-64 px inputs: a 3x3 stride-1 stem and no max-pool.

    Stages of (3, 4, 6, 3) basic blocks with width, 2·width, 4·width and 8·width channels
    (64 … 512 by default, ~21M parameters), global average pooling, linear head: the
    reference's ``CifarResNet34`` (``experiments_jax/training/resnet.py``), initialised as
    it is (:func:`init_as_haiku`).
    """

    STAGES = (3, 4, 6, 3)

    def __init__(self, num_classes: int, width: int = 64) -> None:
        super().__init__()
        self.stem = _conv_bn_relu(3, width)
        layers: list[nn.Module] = []
        c_in = width
        for i, depth in enumerate(self.STAGES):
            c_out = width * 2**i
            for j in range(depth):
                layers.append(BasicBlock(c_in, c_out, stride=2 if (i > 0 and j == 0) else 1))
                c_in = c_out
        self.stages = nn.Sequential(*layers)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(c_in, num_classes)
        init_as_haiku(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.stages(self.stem(x)))


class LowResVGG(Classifier):
    """VGG-11 with batch norm for 32-64 px inputs: eight 3x3 conv-BN-ReLU layers in five
    stages (width … 8·width channels, 64 … 512 by default, ~9M parameters), max-pooling
    after the first four, global average pooling and a linear head instead of VGG's three
    fully connected layers (which assume 224 px inputs)."""

    STAGES = ((1,), (2,), (4, 4), (8, 8), (8, 8))

    def __init__(self, num_classes: int, width: int = 64) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for i, stage in enumerate(self.STAGES):
            for multiple in stage:
                layers.append(_conv_bn_relu(c_in, width * multiple))
                c_in = width * multiple
            if i < len(self.STAGES) - 1:
                layers.append(nn.MaxPool2d(2))
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(c_in, num_classes)
        init_as_haiku(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


MODELS: dict[str, tuple[Callable[..., Classifier], int]] = {
    "small_cnn": (SmallCNN, 32),
    "resnet34": (LowResResNet34, 64),
    "vgg": (LowResVGG, 64),
}
"""Model name → (constructor, default width)."""


def build_model(config: ModelConfig) -> Classifier:
    """A freshly initialised network for ``config`` (on the CPU; move it yourself)."""
    factory, default_width = MODELS[config.name]
    return factory(config.num_classes, width=config.width or default_width)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = [
    "MODELS",
    "BasicBlock",
    "Classifier",
    "FeatureView",
    "LowResResNet34",
    "LowResVGG",
    "ModelConfig",
    "SmallCNN",
    "build_model",
    "count_parameters",
    "init_as_haiku",
]
