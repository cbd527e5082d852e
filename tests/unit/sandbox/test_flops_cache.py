"""The FLOP meter's per-key cache: calls whose shapes change, come back, run backward more than
once or resize a parameter in place are charged exactly what FlopCounterMode counts, tracked
or only watched, with one dry run per distinct key."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from workers.sandbox.metering.flop_counter import forget_process_counts
from workers.sandbox.metering.flops import FlopMeter


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    forget_process_counts()  # each test sees its own dry runs
    yield
    torch.set_num_threads(before)


class ConvNet(nn.Module):
    """FLOPs grow with the batch and with the image's area."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten()
        )
        self.head = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Attention(nn.Module):
    """FLOPs grow with the square of the sequence's length. Written out with matmuls: torch's
    scaled_dot_product_attention takes a CPU kernel that FlopCounterMode does not count on
    CPU, where the meter's meta dry run counts the math (see the limits in flops.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / 8**0.5, dim=-1)
        return self.head((weights @ v).mean(1))


# (batch, shape of one example): shapes change and come back; each visit trains, and every
# other one also evaluates without gradients and runs a second backward through the graph.
SHAPES = {
    "conv": (
        ConvNet,
        [(4, (3, 16, 16)), (4, (3, 8, 8)), (2, (3, 16, 16)), (4, (3, 12, 10)), (4, (3, 8, 8)), (4, (3, 16, 16))],
    ),
    "attention": (Attention, [(2, (5, 8)), (2, (11, 8)), (2, (5, 8)), (3, (11, 8)), (2, (17, 8)), (2, (11, 8))]),
}


def changing_shapes(model: nn.Module, visits: list[tuple[int, tuple[int, ...]]]) -> set[tuple]:
    """Run the visits; returns the distinct keys a meter should measure (shape, mode, grad)."""
    gen = torch.Generator().manual_seed(0)
    keys: set[tuple] = set()
    for i, (batch, shape) in enumerate(visits):
        x = torch.randn(batch, *shape, generator=gen)
        model.train()
        loss = model(x).square().mean()
        keys.add((x.shape, True, True))
        if i % 2:
            loss.backward(retain_graph=True)  # a second backward through the same call
        loss.backward()
        if i % 2:
            model.eval()
            with torch.no_grad():
                model(x)
            keys.add((x.shape, False, False))
    return keys


def counted(fn: Callable[[], object]) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("mode", ["tracked", "watched"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_changing_shapes_are_charged_what_flop_counter_mode_counts(case: str, mode: str) -> None:
    make, visits = SHAPES[case]
    torch.manual_seed(0)
    model = make()
    twin = copy.deepcopy(model)
    expected = counted(lambda: changing_shapes(twin, visits))
    meter = FlopMeter()
    if mode == "tracked":
        meter.track(model)
    else:
        meter.watch()
    try:
        keys = changing_shapes(model, visits)
    finally:
        meter.untrack_all()
    assert meter.measured == expected > 0
    assert meter.measurements == len(keys) < 2 * len(visits)  # revisited shapes hit the cache
    assert meter.untracked == (meter.measured if mode == "watched" else 0)
    forward_only = counted(lambda: [twin(torch.randn(b, *s)) for b, s in visits])
    assert meter.snapshot().backward > meter.snapshot().forward - meter.no_grad >= forward_only
    assert all(p.grad is not None for p in model.parameters())  # the real model trained


def widen(model: nn.Sequential, width: int) -> None:
    """Resize the hidden layer by giving its layers new parameters, as pruning or net2net code
    does (the modules stay: no submodule is registered)."""
    first, last = model[0], model[2]
    first.weight = nn.Parameter(torch.randn(width, first.in_features))
    first.bias = nn.Parameter(torch.randn(width))
    last.weight = nn.Parameter(torch.randn(last.out_features, width))


@pytest.mark.parametrize("mode", ["tracked", "watched"])
def test_a_parameter_resized_is_measured_anew(mode: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)

    def run(net: nn.Sequential) -> None:
        net(x).sum().backward()
        widen(net, 16)
        net(x).sum().backward()
        widen(net, 8)  # back to the first shapes: a cache hit again
        net(x).sum().backward()

    expected = counted(lambda: run(twin))
    meter = FlopMeter()
    if mode == "tracked":
        meter.track(model)
    else:
        meter.watch()
    try:
        run(model)
    finally:
        meter.untrack_all()
    assert (
        meter.measured
        == expected
        == 2 * counted(lambda: model(x).sum().backward()) + counted(lambda: (widen(twin, 16), twin(x).sum().backward()))
    )
    assert meter.measurements == 2
