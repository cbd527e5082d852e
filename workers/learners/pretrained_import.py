"""Checkpoints pretrained elsewhere, converted for ``pt`` / ``pt_ft`` (``nevis pretrain import``).

The paper's PT starts from a ResNet-34 pretrained on ImageNet. This service's ResNet-34 is the
low-resolution one (:class:`~workers.learners.models.LowResResNet34`), so a torchvision
ResNet-34 state dict (keys ``conv1``, ``bn1``, ``layer1`` … ``layer4``, ``fc``) is mapped onto it:

- **mapped one to one**: the 16 basic blocks, ``layerL.i.{conv1,bn1,conv2,bn2}`` →
  ``stages.k.{…}`` (k counts blocks over the stages 3, 4, 6, 3), each stage's first-block
  ``downsample.{0,1}`` → ``shortcut.{0,1}``, with batch norm's running statistics; ``fc`` →
  ``head`` (1000 classes; every PT learner replaces the head per task anyway);
- **the stem differs**: torchvision's is a 7×7 stride-2 convolution then a 3×3 stride-2
  max-pool (for 224 px), this one a 3×3 stride-1 convolution and no pool (for 32–64 px). With
  ``stem="resample"`` (default) the 7×7 kernels are resampled to 3×3 by area (each filter's
  total weight, its response to a uniform patch, kept exactly) and ``bn1`` → ``stem.1``; with
  ``stem="fresh"`` the stem convolution and its batch norm keep this network's initialisation.
  Either way the stages see the image at 4× the resolution torchvision's saw, and the
  statistics come from 224 px ImageNet images normalised torchvision's way, not the [-1, 1]
  scaling used here: fine-tuning adapts, but the start is not the paper's.

A predictor file of this service (``nevis-predictor``: e.g. a ResNet-34 trained here on an
ImageNet stream, which is how the reference pretrains, at 64 px) is taken as it is and only
stamped. Either way the result records its provenance (:mod:`workers.learners.provenance`).
Nothing here imports learner code; the file written is the layout ``IndepLearner`` reads.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import asdict, replace

import torch

from services.core.errors import LearnerError
from workers.learners.augment import AugmentConfig
from workers.learners.models import LowResResNet34, ModelConfig, build_model
from workers.learners.provenance import EXTERNAL, SELF, Provenance, read_provenance, stamp

TORCHVISION_RESNET34 = "torchvision-resnet34"
NEVIS_PREDICTOR = "nevis-predictor"
IMPORT_SOURCES = (TORCHVISION_RESNET34, NEVIS_PREDICTOR)
STEMS = ("resample", "fresh")
PREDICTOR_FORMAT = 1
"""The predictor file layout ``IndepLearner.save_predictor`` writes and ``load_predictor`` reads."""
_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def block_names() -> list[tuple[str, str]]:
    """(torchvision prefix, this network's prefix) of every basic block, in order."""
    names, k = [], 0
    for stage, depth in enumerate(LowResResNet34.STAGES, start=1):
        for i in range(depth):
            names.append((f"layer{stage}.{i}", f"stages.{k}"))
            k += 1
    return names


def key_map(stem: str = "resample") -> dict[str, str]:
    """torchvision ResNet-34 key → LowResResNet34 key, for every tensor copied as it is."""
    if stem not in STEMS:
        raise LearnerError(f"Unknown stem mapping {stem!r}; known: {', '.join(STEMS)}.")
    pairs = {f"fc.{p}": f"head.{p}" for p in ("weight", "bias")}
    if stem == "resample":
        pairs.update({f"bn1.{p}": f"stem.1.{p}" for p in _BN})
    for tv, ours in block_names():
        pairs.update({f"{tv}.{conv}.weight": f"{ours}.{conv}.weight" for conv in ("conv1", "conv2")})
        pairs.update({f"{tv}.{bn}.{p}": f"{ours}.{bn}.{p}" for bn in ("bn1", "bn2") for p in _BN})
    for stage_first in ("layer2.0", "layer3.0", "layer4.0"):
        ours = dict(block_names())[stage_first]
        pairs[f"{stage_first}.downsample.0.weight"] = f"{ours}.shortcut.0.weight"
        pairs.update({f"{stage_first}.downsample.1.{p}": f"{ours}.shortcut.1.{p}" for p in _BN})
    return pairs


def resample_stem(kernel: torch.Tensor, size: int = 3) -> torch.Tensor:
    """A (C, 3, k, k) stem kernel resampled to ``size``×``size`` by area: each tap is shared among
    the new taps its square overlaps, so each filter's total weight (its response to a uniform
    patch) is kept exactly."""
    k = kernel.shape[-1]
    edges = torch.arange(size + 1, dtype=torch.float64) * k / size
    taps = torch.arange(k, dtype=torch.float64)
    share = (
        (torch.minimum(edges[1:, None], taps[None, :] + 1) - torch.maximum(edges[:-1, None], taps[None, :]))
        .clamp(min=0)
        .float()
    )  # (size, k), columns sum to 1
    return torch.einsum("ij,ocjl,ml->ocim", share, kernel.float(), share)


def convert_torchvision_resnet34(
    state: Mapping[str, torch.Tensor], *, stem: str = "resample"
) -> tuple[ModelConfig, dict[str, torch.Tensor], str]:
    """The LowResResNet34 config, weights and a description of the mapping for ``state``.

    Raises:
        LearnerError: ``state`` is not a torchvision ResNet-34 (keys missing or left over,
            or shapes that do not fit: each named).
    """
    state = {k.removeprefix("module."): v for k, v in state.items()}  # DataParallel's prefix
    pairs = key_map(stem)
    fc = state.get("fc.weight")
    if not isinstance(fc, torch.Tensor) or fc.ndim != 2:
        raise LearnerError("Not a torchvision ResNet-34 state dict: no 2-d 'fc.weight'.")
    config = ModelConfig("resnet34", int(fc.shape[0]))
    weights = build_model(config).state_dict()  # what is not mapped keeps its initialisation
    expected = set(pairs) | {"conv1.weight"} | ({f"bn1.{p}" for p in _BN} if stem == "fresh" else set())
    missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or extra:
        raise LearnerError(
            f"Not a torchvision ResNet-34 state dict: missing {missing[:8]}"
            f"{' …' if len(missing) > 8 else ''}, unexpected {extra[:8]}{' …' if len(extra) > 8 else ''}."
        )
    wrong = [
        f"{tv} {tuple(state[tv].shape)} → {ours} {tuple(weights[ours].shape)}"
        for tv, ours in pairs.items()
        if state[tv].shape != weights[ours].shape
    ]
    if stem == "resample" and state["conv1.weight"].shape[:2] != weights["stem.0.weight"].shape[:2]:
        wrong.append(
            f"conv1.weight {tuple(state['conv1.weight'].shape)} → stem.0.weight {tuple(weights['stem.0.weight'].shape)}"
        )
    if wrong:
        raise LearnerError(f"The torchvision weights do not fit a width-64 LowResResNet34: {'; '.join(wrong[:8])}.")
    for tv, ours in pairs.items():
        weights[ours] = state[tv].detach().to(weights[ours].dtype).clone()
    if stem == "resample":
        weights["stem.0.weight"] = resample_stem(state["conv1.weight"])
        how = "stem 7x7 kernels resampled to 3x3 by area (total weight kept), bn1 -> stem.1"
    else:
        how = "stem convolution and batch norm left at initialisation"
    mapping = (
        f"torchvision ResNet-34 -> LowResResNet34: 16 basic blocks, 3 shortcuts and fc -> head "
        f"({config.num_classes} classes) one to one; {how}; no max-pool here"
    )
    return config, weights, mapping


def predictor_file(
    config: ModelConfig, weights: Mapping[str, torch.Tensor], *, image_size: int, kind: str = "single"
) -> bytes:
    """Weights as a predictor file of the layout ``IndepLearner`` reads (evaluation at ``image_size``)."""
    buffer = io.BytesIO()
    torch.save(
        {
            "format": PREDICTOR_FORMAT,
            "model": asdict(config),
            "augment": asdict(AugmentConfig(size=image_size)),
            "kind": kind,
            "state_dict": {k: v.detach().cpu() for k, v in weights.items()},
        },
        buffer,
    )
    return buffer.getvalue()


def import_checkpoint(
    data: bytes, *, source: str, declared: str, stem: str = "resample", image_size: int = 64
) -> bytes:
    """A checkpoint for ``pt`` / ``pt_ft`` from ``data`` (a file of kind ``source``), stamped with
    ``declared`` as an external provenance.

    Raises:
        LearnerError: an unknown source, a file that is not of its kind, a declaration left
            empty, or a ``nevis pretrain`` checkpoint (self-pretrained: run it as ``pt_self``).
    """
    if source not in IMPORT_SOURCES:
        raise LearnerError(f"Unknown source {source!r}; known: {', '.join(IMPORT_SOURCES)}.")
    digest = hashlib.sha256(data).hexdigest()
    try:
        provenance = Provenance(EXTERNAL, declared.strip(), source, source_sha256=digest)
    except ValueError as exc:
        raise LearnerError(str(exc)) from exc
    if source == NEVIS_PREDICTOR:
        earlier = read_provenance(data)
        if earlier is not None and earlier.origin == SELF:
            raise LearnerError(
                f"This checkpoint was self-pretrained ({earlier.declared}); it cannot be declared "
                "external. Run it as pt_self / pt_ft_self."
            )
        return stamp(data, provenance)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several unrelated types for bad bytes
        raise LearnerError(f"Cannot read the torchvision state dict: {exc}") from exc
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise LearnerError(f"The file holds a {type(state).__name__}, not a state dict.")
    config, weights, mapping = convert_torchvision_resnet34(state, stem=stem)
    file = predictor_file(config, weights, image_size=image_size)
    return stamp(file, replace(provenance, mapping=mapping))


__all__ = [
    "IMPORT_SOURCES",
    "NEVIS_PREDICTOR",
    "PREDICTOR_FORMAT",
    "STEMS",
    "TORCHVISION_RESNET34",
    "block_names",
    "convert_torchvision_resnet34",
    "import_checkpoint",
    "key_map",
    "predictor_file",
    "resample_stem",
]
