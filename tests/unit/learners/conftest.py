"""Fixtures of the learner tests: a small real task (sklearn digits) and a trial context.

The context implements the TrialContext protocol and logs every call, so tests can check
the order of ``track`` and ``progress``; its ``track`` goes through the harness's FlopMeter,
so tests can also check what was counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.metering.flops import FlopMeter
from workers.stream.task_view import CausalTaskView


@dataclass
class RecordingContext:
    """A TrialContext that records what learner code asked of it."""

    seed: int = 0
    steps: int = 10
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    events: list[tuple[str, Any]] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    reported: int = 0

    def __post_init__(self) -> None:
        self.meter = FlopMeter()

    def track(self, module: Any) -> Any:
        self.events.append(("track", type(module).__name__))
        return self.meter.track(module)

    def report_flops(self, flops: int) -> None:
        self.reported += flops

    def progress(self, step: int, predictor: Any, *, loss: float | None = None) -> None:
        self.events.append(("progress", step))
        self.losses.append(None if loss is None else float(loss))  # read at once: a test may look


def task_info(
    *, kind: str = "single", num_classes: int = 10, size: int = 32, n_train: int = 0, n_dev: int = 0
) -> TaskInfo:
    return TaskInfo(
        order=0,
        key="t0",
        dataset="digits",
        title="digits",
        year=1998,
        domain=None,
        kind=kind,  # type: ignore[arg-type]
        num_classes=num_classes,
        class_names=tuple(str(i) for i in range(num_classes)),
        image_size=size,
        num_train=n_train,
        num_dev=n_dev,
    )


def make_view(info: TaskInfo, train: LabelledData, dev: LabelledData) -> CausalTaskView:
    return CausalTaskView(info, train, dev, {}, lambda order: train, stream_length=1)


@dataclass(frozen=True)
class Digits:
    info: TaskInfo
    train: LabelledData
    test: LabelledData


@pytest.fixture(scope="session")
def digits() -> Digits:
    """sklearn's 8x8 digits, upsampled to 32x32 RGB uint8, split 80/20."""
    data = load_digits()
    grey = np.round(data.images * (255.0 / 16.0)).astype(np.uint8)
    big = grey.repeat(4, axis=1).repeat(4, axis=2)
    rgb = np.ascontiguousarray(np.stack([big] * 3, axis=-1))
    labels = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    cut = int(0.8 * len(labels))
    tr, te = order[:cut], order[cut:]
    info = task_info(n_train=len(tr), n_dev=len(te))
    return Digits(info, LabelledData(rgb[tr], labels[tr]), LabelledData(rgb[te], labels[te]))


@pytest.fixture(scope="package", autouse=True)
def one_thread():
    """One intra-op thread: the box is shared and small convs gain nothing from more."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
