"""The batched training input: the separable crop-and-flip gives the per-image path's pixels
for the same draws, the batch stream replays the training loop's draws, and the speed settings
(channels-last, bf16 autocast, torch.compile) leave the FLOP meter's count of a step unchanged."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from workers.learners.acceleration import Acceleration, autocast, prepare, uncompile
from workers.learners.augment import AugmentConfig, crop_params, train_transform
from workers.learners.batch_crop import crop_flip, train_batch
from workers.learners.indep import IndepLearner
from workers.learners.input_pipeline import TrainBatches
from workers.learners.models import Classifier, SmallCNN
from workers.learners.protocol import LabelledData
from workers.learners.training import epoch_batches
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.task_info import Originals

from .conftest import RecordingContext, make_view

TOLERANCE = 1e-4  # float rounding of the same bilinear arithmetic, on a [-1, 1] scale


def originals(n: int = 48, canvas: tuple[int, int] = (96, 80), seed: int = 0) -> Originals:
    """Random images on a padded canvas, each with its own valid extent (some tiny)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, *canvas, 3), dtype=np.uint8)
    extents = np.stack([rng.integers(3, canvas[0] + 1, n), rng.integers(3, canvas[1] + 1, n)], 1)
    return Originals(images, extents.astype(np.int32))


@pytest.mark.parametrize(
    "cfg",
    [
        AugmentConfig(size=64),
        AugmentConfig(size=32, flip_p=1.0, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        AugmentConfig(size=64, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0),
    ],
)
@pytest.mark.parametrize("with_extents", [True, False])
def test_batched_crop_gives_the_per_image_paths_pixels_for_the_same_draws(cfg, with_extents):
    src = originals()
    extents = src.extents if with_extents else None
    for i in (0, 7):  # the existing path, one image at a time (its per-image use) and batched
        one = train_transform(
            src.images[i : i + 1],
            cfg,
            generator=torch.Generator().manual_seed(i),
            extents=None if extents is None else extents[i : i + 1],
        )
        same = train_batch(
            src.images[i : i + 1],
            cfg,
            generator=torch.Generator().manual_seed(i),
            extents=None if extents is None else extents[i : i + 1],
        )
        assert (one - same).abs().max().item() < TOLERANCE
    old = train_transform(src.images, cfg, generator=torch.Generator().manual_seed(5), extents=extents)
    new = train_batch(src.images, cfg, generator=torch.Generator().manual_seed(5), extents=extents)
    assert new.shape == old.shape == (len(src), 3, cfg.size, cfg.size)
    assert (old - new).abs().max().item() < TOLERANCE
    assert new.is_contiguous()
    last = train_batch(src.images, cfg, generator=torch.Generator().manual_seed(5), extents=extents, channels_last=True)
    assert last.is_contiguous(memory_format=torch.channels_last) and torch.equal(last, new)


def test_a_flip_mirrors_the_same_window_and_padding_is_never_read():
    src = originals(n=16)
    theta = crop_params(
        16, AugmentConfig(size=32, flip_p=0.0), torch.Generator().manual_seed(1), extents=src.extents, canvas=(96, 80)
    )
    flipped = theta.clone()
    flipped[:, 0, 0] *= -1
    source, valid = torch.from_numpy(src.images), torch.from_numpy(src.extents)
    cfg = AugmentConfig(size=32)
    plain, mirror = crop_flip(source, theta, cfg, valid), crop_flip(source, flipped, cfg, valid)
    assert (plain.flip(-1) - mirror).abs().max().item() < TOLERANCE
    painted = source.clone()
    for row, (h, w) in zip(painted, src.extents, strict=True):  # padding at 255: must not show
        row[h:], row[:, w:] = 255, 255
    assert torch.equal(crop_flip(painted, theta, cfg, valid), plain)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("world_size", [1, 2])
def test_the_batch_stream_replays_the_training_loops_draws(world_size, prefetch):
    """Batches (order, crops, flips, labels) as the loop the stream replaced made them."""
    src = originals(n=40, seed=3)
    data = LabelledData(np.zeros((40, 32, 32, 3), np.uint8), np.arange(40) % 7, src)
    labels = torch.from_numpy(data.labels)
    cfg, steps, batch = AugmentConfig(size=32), 6, 16
    for rank in range(world_size):
        gen = torch.Generator().manual_seed(11)
        crops = gen if world_size == 1 else torch.Generator().manual_seed(100 + rank)
        stream = TrainBatches(
            data,
            labels,
            cfg,
            steps=steps,
            batch=batch,
            generator=gen,
            crops=crops,
            rank=rank,
            world_size=world_size,
            prefetch_on_cpu=prefetch,
        )
        assert stream.prefetch is prefetch  # the background thread draws one step ahead
        got = list(stream)
        gen = torch.Generator().manual_seed(11)
        crops = gen if world_size == 1 else torch.Generator().manual_seed(100 + rank)
        for (x, y), idx in zip(got, epoch_batches(40, batch, steps, gen), strict=True):
            index = idx.numpy()[rank::world_size]
            source, extents = data.crop_source(index)
            want = train_transform(source, cfg, generator=crops, extents=extents)
            assert torch.equal(y, labels[torch.from_numpy(index)])
            assert (x - want).abs().max().item() < TOLERANCE
        assert len(got) == steps and stream.mode == "cpu" and stream.times.batches == steps


def test_without_originals_the_task_images_are_cropped_whole():
    images = originals(n=20, canvas=(32, 32)).images
    data = LabelledData(images, np.zeros(20, np.int64))
    cfg = AugmentConfig(size=32)
    ((x, _),) = TrainBatches(
        data,
        torch.zeros(20, dtype=torch.int64),
        cfg,
        steps=1,
        batch=20,
        generator=torch.Generator().manual_seed(0),
        crops=torch.Generator().manual_seed(1),
    )
    idx = next(epoch_batches(20, 20, 1, torch.Generator().manual_seed(0)))
    want = train_transform(images[idx.numpy()], cfg, generator=torch.Generator().manual_seed(1))
    assert (x - want).abs().max().item() < TOLERANCE


class _Tiny(Classifier):
    """A one-conv classifier: compiles in seconds rather than minutes."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _step_flops(model: nn.Module, accel: Acceleration, size: int = 32) -> tuple[int, int, int]:
    """The meter's measured, training-update and no-grad FLOPs of two training steps and an eval call."""
    meter = FlopMeter()
    net = meter.track(prepare(model, accel))
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, size, size, generator=gen), torch.randint(0, 10, (16,), generator=gen)
    for _ in range(2):
        with autocast("cpu", accel):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
    uncompile(model)
    with torch.no_grad():
        net(x[:5])
    return meter.measured, meter.updates, meter.no_grad


def test_channels_last_and_bf16_autocast_leave_the_flop_count_unchanged():
    plain = _step_flops(SmallCNN(10), Acceleration(channels_last=False, autocast=False))
    fast = _step_flops(SmallCNN(10), Acceleration(channels_last=True, autocast=True))
    assert plain == fast and plain[0] > 0 and plain[1] > 0 and plain[2] > 0


def test_a_trial_is_charged_the_same_flops_with_channels_last_and_autocast(digits):
    """Through the learner's own loop (batched input, tracked network, dev pass at the end)."""
    view = make_view(digits.info, digits.train, digits.test)
    counts = []
    for accel in (Acceleration(channels_last=False, autocast=False), Acceleration(channels_last=True, autocast=True)):
        ctx = RecordingContext(seed=0, steps=3)
        IndepLearner("small_cnn", acceleration=accel).train(view, None, {"learning_rate": 0.05}, ctx)
        counts.append((ctx.meter.measured, ctx.meter.no_grad))
    assert counts[0] == counts[1] and counts[0][0] > 0


def test_the_defaults_are_on_for_cuda_only():
    cpu = Acceleration().resolve("cpu")
    assert (cpu.channels_last, cpu.autocast, cpu.compile) == (False, False, False)
    assert Acceleration().resolve("cuda:0").channels_last is True


def test_an_unknown_compile_mode_is_named_with_the_known_ones():
    assert Acceleration(compile=True, compile_mode="reduce-overhead").compile_mode == "reduce-overhead"
    with pytest.raises(ValueError, match="'compile_mode' must be one of default, reduce-overhead.*Got 'fast'"):
        Acceleration(compile=True, compile_mode="fast")


@pytest.mark.skipif(
    os.environ.get("NEVIS_TEST_COMPILE") != "1",
    reason="compiling takes about a minute on a 2-core machine; NEVIS_TEST_COMPILE=1 runs it",
)
def test_torch_compile_leaves_the_flop_count_unchanged():
    torch.manual_seed(0)
    plain = _step_flops(_Tiny(), Acceleration(channels_last=False, autocast=False))
    compiled = _step_flops(_Tiny(), Acceleration(channels_last=True, autocast=True, compile=True))
    assert plain == compiled and plain[0] > 0


def test_the_batched_crop_makes_every_tensor_on_the_sources_device():
    """On ``meta`` (no data), mixing in a host tensor would raise: what runs on a GPU stays there."""
    src = originals(n=8)
    theta = crop_params(
        8, AugmentConfig(size=32), torch.Generator().manual_seed(0), extents=src.extents, canvas=(96, 80)
    )
    source = torch.from_numpy(src.images).to("meta")
    for extents in (torch.from_numpy(src.extents).to("meta"), None):
        out = crop_flip(source, theta.to("meta"), AugmentConfig(size=32), extents, channels_last=True)
        assert out.device.type == "meta" and out.shape == (8, 3, 32, 32)
