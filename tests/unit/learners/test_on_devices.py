"""What a trial computes on each device this machine has (the CPU here; a GPU where one is
lent, through bench/gpu_checks.sh): the FLOP meter's count of a training step under the
device's speed settings, the training curve read from tensor losses, the batched crop.

Self-contained (no fixtures from conftest files): the GPU check runs it with ``--noconftest``
on a machine that has torch but not the service's database stack.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from workers.learners.acceleration import Acceleration, autocast, prepare
from workers.learners.augment import AugmentConfig, crop_params
from workers.learners.batch_crop import crop_flip
from workers.learners.indep import IndepLearner
from workers.learners.models import ModelConfig, build_model
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.context import LOSS_READ_EVERY, LocalTrialContext
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.task_view import CausalTaskView

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
SIZE, CLASSES = 64, 10


def one_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: str, accel: Acceleration) -> None:
    with autocast(device, accel):
        loss = F.cross_entropy(model(x), y)
    loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_the_meter_counts_a_step_as_flop_counter_mode_does_under_the_devices_settings(device):
    """ResNet-34 (narrow) at 64 px: channels-last and bf16 autocast on a GPU, neither on CPUs."""
    accel = Acceleration().resolve(device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, SIZE, SIZE, generator=gen).to(device)
    y = torch.randint(0, CLASSES, (4,), generator=gen).to(device)
    if accel.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    torch.manual_seed(0)
    model = prepare(build_model(ModelConfig("resnet34", CLASSES, 8)).to(device), accel)
    meter = FlopMeter()
    one_step(meter.track(model), x, y, device, accel)
    metered = meter.measured
    meter.untrack_all()  # its hooks are on the model itself
    with FlopCounterMode(display=False) as counter:
        one_step(model, x, y, device, accel)
    assert metered == counter.get_total_flops() > 0


def view_of(n: int) -> CausalTaskView:
    rng = np.random.default_rng(0)
    data = LabelledData(
        rng.integers(0, 256, (n, SIZE, SIZE, 3), dtype=np.uint8), rng.integers(0, CLASSES, n).astype(np.int64)
    )
    info = TaskInfo(
        order=0,
        key="t",
        dataset="generated",
        title="generated",
        year=2022,
        domain=None,
        kind="single",
        num_classes=CLASSES,
        class_names=tuple(map(str, range(CLASSES))),
        image_size=SIZE,
        num_train=n,
        num_dev=0,
    )
    dev = LabelledData(np.zeros((0, SIZE, SIZE, 3), np.uint8), np.zeros(0, np.int64))
    return CausalTaskView(info, data, dev, {}, lambda order: data, stream_length=1)


class SpyingContext(LocalTrialContext):
    """The harness's context, also reading each loss at once, as ``float(loss)`` did."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.read_at_once: list[float | None] = []

    def progress(self, step, predictor, *, loss=None):
        self.read_at_once.append(None if loss is None else float(loss))
        super().progress(step, predictor, loss=loss)


@pytest.mark.parametrize("device", DEVICES)
def test_a_trials_curve_holds_the_losses_it_reported_on_the_device(device):
    steps = LOSS_READ_EVERY + 6  # one full batch read during training, the rest when the curve is read
    ctx = SpyingContext(seed=0, steps=steps, save_predictor=lambda p: b"", device=device)
    IndepLearner("small_cnn").train(view_of(32), None, {"learning_rate": 0.05, "batch_size": 8}, ctx)
    assert [p.step for p in ctx.curve] == list(range(steps + 1))
    assert [p.loss for p in ctx.curve] == ctx.read_at_once and ctx.read_at_once[0] is None
    assert all(loss > 0 for loss in ctx.read_at_once[1:])


@pytest.mark.parametrize("device", DEVICES)
def test_the_batched_crop_on_the_device_gives_the_cpus_pixels(device):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (8, 96, 80, 3), dtype=np.uint8)
    extents = np.stack([rng.integers(3, 97, 8), rng.integers(3, 81, 8)], 1).astype(np.int32)
    cfg = AugmentConfig(size=SIZE)
    theta = crop_params(8, cfg, torch.Generator().manual_seed(0), extents=extents, canvas=(96, 80))
    on_cpu = crop_flip(torch.from_numpy(images), theta, cfg, torch.from_numpy(extents))
    there = crop_flip(torch.from_numpy(images).to(device), theta.to(device), cfg, torch.from_numpy(extents).to(device))
    assert there.device.type == device
    torch.testing.assert_close(there.cpu(), on_cpu, atol=1e-4, rtol=0)
