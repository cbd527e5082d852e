"""FlopMeter: cached per-key counts equal counting every step for real with FlopCounterMode."""

from __future__ import annotations

import copy
import gc
import pickle
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from services.core.errors import LearnerError
from workers.sandbox.metering.flop_counter import forget_process_counts
from workers.sandbox.metering.flops import FlopCounts, FlopMeter

Batch = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def meter() -> Iterator[FlopMeter]:
    forget_process_counts()  # each test sees its own dry runs
    m = FlopMeter()
    yield m
    m.untrack_all()


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def cnn_batch(b: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(b, 3, 12, 12), torch.randint(0, 5, (b,))


def mlp_batch(b: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(b, 12), torch.randint(0, 4, (b,))


CASES = {"cnn": (SmallCNN, cnn_batch), "mlp": (MLP, mlp_batch)}


def protocol(model: nn.Module, batch: Batch) -> set[tuple]:
    """Train, evaluate, train with a frozen backbone, run forward-only passes with grad on.

    Returns the distinct (training, grad, requires_grad pattern, batch) configurations seen.
    """
    seen: set[tuple] = set()
    opt = torch.optim.SGD([p for p in model.parameters()], lr=0.05, momentum=0.9)

    def call(x: torch.Tensor) -> torch.Tensor:
        pattern = tuple(p.requires_grad for p in model.parameters())
        seen.add((model.training, torch.is_grad_enabled(), pattern, x.shape[0]))
        return model(x)

    def epoch() -> None:
        for b in (8, 8, 5):  # a smaller last batch
            x, y = batch(b)
            loss = F.cross_entropy(call(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    model.train()
    epoch()
    epoch()
    model.eval()
    with torch.no_grad():
        for b in (8, 5):
            call(batch(b)[0])
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    model.train()
    epoch()
    for p in model.backbone.parameters():
        p.requires_grad_(True)
    for mode in (False, True):  # forward-only with grad enabled: never charged a backward
        model.train(mode)
        for b in (8, 5):
            call(batch(b)[0])
    return seen


def reference_flops(model: nn.Module, batch: Batch, seed: int = 0) -> int:
    torch.manual_seed(seed)
    with FlopCounterMode(display=False) as counter:
        protocol(model, batch)
    return counter.get_total_flops()


@pytest.mark.parametrize("case", sorted(CASES))
def test_meter_total_equals_counting_every_step(case: str, meter: FlopMeter) -> None:
    make, batch = CASES[case]
    torch.manual_seed(0)
    model = make()
    expected = reference_flops(copy.deepcopy(model), batch)
    torch.manual_seed(0)
    seen = protocol(meter.track(model), batch)
    assert meter.total == meter.measured == expected
    assert meter.snapshot().backward > 0 and meter.snapshot().forward > 0
    assert meter.measurements == len(seen) == 8  # one dry run per distinct key, then cache hits


@pytest.mark.parametrize("case", sorted(CASES))
def test_dry_runs_are_invisible_to_an_enclosing_flop_counter(case: str, meter: FlopMeter) -> None:
    make, batch = CASES[case]
    torch.manual_seed(0)
    model = meter.track(make())
    with FlopCounterMode(display=False) as counter:
        protocol(model, batch)
    assert meter.measured == counter.get_total_flops() > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_tracking_does_not_change_training(case: str) -> None:
    make, batch = CASES[case]
    torch.manual_seed(0)
    plain = make()
    tracked = copy.deepcopy(plain)
    torch.manual_seed(1)
    protocol(plain, batch)
    meter = FlopMeter()
    torch.manual_seed(1)
    protocol(meter.track(tracked), batch)
    meter.untrack_all()
    for (name, a), (_, b) in zip(plain.state_dict().items(), tracked.state_dict().items()):
        assert torch.equal(a, b), name


def test_linear_closed_form(meter: FlopMeter) -> None:
    b, n_in, n_out = 7, 6, 4
    layer = meter.track(nn.Linear(n_in, n_out))
    layer(torch.randn(b, n_in)).sum().backward()  # input needs no grad: weight gradient only
    assert meter.snapshot() == FlopCounts(2 * b * n_in * n_out, 2 * b * n_in * n_out, 0, 1)
    x = torch.randn(b, n_in, requires_grad=True)
    layer(x).sum().backward()  # now also the input gradient
    assert meter.measured == 2 * b * n_in * n_out * (2 + 3)
    assert meter.measurements == 2


def test_forward_without_backward_is_not_charged_a_backward(meter: FlopMeter) -> None:
    layer = meter.track(nn.Linear(5, 3))
    out = layer(torch.randn(4, 5))
    assert out.requires_grad and meter.snapshot().backward == 0
    loss = out.sum()
    loss.backward(retain_graph=True)
    loss.backward()  # a second backward is real compute: charged again
    assert meter.snapshot().backward == 2 * (2 * 4 * 5 * 3)


class TwoHeads(nn.Module):
    def __init__(self, as_dict: bool) -> None:
        super().__init__()
        self.as_dict = as_dict
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, *, scale: float = 1.0):
        feats = torch.relu(self.body(x)) * scale
        logits = self.head(feats)
        return {"logits": logits, "features": feats} if self.as_dict else (logits, feats)


@pytest.mark.parametrize("as_dict", [False, True])
def test_tuple_and_dict_outputs_and_kwargs(as_dict: bool, meter: FlopMeter) -> None:
    def run(model: nn.Module) -> None:
        torch.manual_seed(0)
        for b in (4, 4, 3):
            out = model(torch.randn(b, 6), scale=0.5)
            logits = out["logits"] if as_dict else out[0]
            logits.square().mean().backward()
        model(torch.randn(4, 6))  # forward only

    model = TwoHeads(as_dict)
    with FlopCounterMode(display=False) as counter:
        run(copy.deepcopy(model))
    run(meter.track(model))
    assert meter.measured == counter.get_total_flops() > 0
    assert meter.measurements == 3


def test_grad_free_modes_count_forward_only(meter: FlopMeter) -> None:
    layer = meter.track(nn.Linear(5, 3))
    with torch.inference_mode():
        layer(torch.randn(2, 5))
    with torch.no_grad():
        layer(torch.randn(2, 5))
    assert meter.snapshot() == FlopCounts(2 * (2 * 2 * 5 * 3), 0, 0, 1, no_grad=2 * (2 * 2 * 5 * 3))
    assert meter.updates == meter.snapshot().updates == 0  # no training update: not in NEVIS'22's count


def test_updates_are_the_passes_with_gradients_and_what_the_learner_reports(meter: FlopMeter) -> None:
    """NEVIS'22 counts training updates: every backward and the forwards made with gradients
    on; a validation forward under no_grad is in the total but not in the updates."""
    layer = meter.track(nn.Linear(5, 3, bias=False))
    layer(torch.randn(4, 5)).sum().backward()  # forward 2*4*5*3, weight gradient the same
    with torch.no_grad():
        layer(torch.randn(10, 5))  # validation: 2*10*5*3
    meter.report_flops(7)
    assert (meter.measured, meter.no_grad, meter.updates) == (2 * 120 + 300, 300, 2 * 120 + 7)


def test_nested_tracked_modules_are_counted_once(meter: FlopMeter) -> None:
    model = SmallCNN()
    x, y = cnn_batch(6)
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(copy.deepcopy(model)(x), y).backward()
        model.head(torch.randn(6, 16))
    meter.track(model.head)
    meter.track(model)  # contains the head: only the outermost call counts
    F.cross_entropy(model(x), y).backward()
    model.head(torch.randn(6, 16))  # called on its own: counted
    assert meter.measured == counter.get_total_flops()


class FeatureView(nn.Module):
    """A wrapper that calls a tracked model's method rather than the model itself."""

    def __init__(self, model: SmallCNN) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.backbone(x)


def test_wrapper_around_a_tracked_model_counts_its_own_calls(meter: FlopMeter) -> None:
    model = meter.track(SmallCNN())
    view = meter.track(FeatureView(model))
    x = cnn_batch(4)[0]
    with FlopCounterMode(display=False) as counter:
        model(x)
        view(x)
    assert meter.measured == counter.get_total_flops()
    assert meter.track(view) is view and meter.measurements == 2  # tracking twice is a no-op


def test_a_new_meter_takes_over_a_tracked_module() -> None:
    first, second = FlopMeter(), FlopMeter()
    layer = first.track(nn.Linear(3, 2))
    layer(torch.randn(1, 3))
    assert second.track(layer) is layer
    layer(torch.randn(1, 3))
    assert (first.measured, second.measured) == (12, 12)
    second.untrack_all()
    layer(torch.randn(1, 3))
    assert (first.measured, second.measured) == (12, 12)


def test_copies_and_pickles_of_a_tracked_module_are_not_tracked(meter: FlopMeter) -> None:
    layer = meter.track(nn.Linear(3, 2))
    copy.deepcopy(layer)(torch.randn(1, 3))
    pickle.loads(pickle.dumps(layer))(torch.randn(1, 3))
    assert meter.measured == 0
    layer(torch.randn(1, 3))
    assert meter.measured == 12


def test_structure_change_after_tracking_is_measured_anew(meter: FlopMeter) -> None:
    model = SmallCNN(classes=5)
    reference = copy.deepcopy(model)
    x = cnn_batch(4)[0]
    with FlopCounterMode(display=False) as counter:
        reference(x)
        reference.head = nn.Linear(16, 9)  # a new head of another size: same input key
        reference(x)
    meter.track(model)(x)
    model.head = nn.Linear(16, 9)
    model(x)
    assert meter.measured == counter.get_total_flops()
    assert meter.measurements == 2


class NoMeta(nn.Module):
    """``.item()`` has no meta kernel, and dropout draws random numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.lin(x), 0.5, self.training) * float(x.abs().max().item() > 0)


def test_fallback_measures_a_real_copy_without_side_effects(meter: FlopMeter) -> None:
    model = NoMeta()
    twin = copy.deepcopy(model)
    x = torch.randn(5, 6)
    torch.manual_seed(3)
    expected, expected_next = twin(x), torch.rand(3)
    torch.manual_seed(3)
    out = meter.track(model)(x)
    assert torch.equal(out, expected)
    assert torch.equal(torch.rand(3), expected_next)  # the dry run left the generator alone
    out.sum().backward()
    assert meter.snapshot() == FlopCounts(2 * 5 * 6 * 4, 2 * 5 * 6 * 4, 0, 1)
    assert len(meter.fallbacks) == 1 and meter.fallbacks[0].startswith("NoMeta")


class Flaky(nn.Module):
    """Fails its first call after the linear layer ran (a copy made later does not fail)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.fail_next = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lin(x)
        if self.fail_next:
            self.fail_next = False
            raise ValueError("transient failure")
        return out


def test_a_failed_call_is_not_charged_and_does_not_stop_counting(meter: FlopMeter) -> None:
    model = meter.track(Flaky())
    with pytest.raises(ValueError, match="transient"):
        model(torch.randn(2, 3))
    assert meter.measured == 0
    model(torch.randn(2, 3))
    assert meter.measured == 2 * 2 * 3 * 3


def test_untrack_all_stops_counting_and_keeps_the_figures(meter: FlopMeter) -> None:
    layer = meter.track(nn.Linear(3, 2))
    layer(torch.randn(1, 3))
    meter.untrack_all()
    layer(torch.randn(1, 3))
    assert meter.measured == 12


def test_reset_zeroes_figures_but_keeps_the_cache(meter: FlopMeter) -> None:
    layer = meter.track(nn.Linear(3, 2))
    layer(torch.randn(1, 3))
    meter.report_flops(5)
    before = meter.snapshot()
    meter.reset()
    assert before == FlopCounts(12, 0, 5, 1) and before.total == 17
    assert meter.snapshot() == FlopCounts(0, 0, 0, 1)
    layer(torch.randn(1, 3))  # same key as before the reset: no new dry run
    assert meter.snapshot() == FlopCounts(12, 0, 0, 1)


def test_track_refuses_what_is_not_a_torch_module(meter: FlopMeter) -> None:
    with pytest.raises(LearnerError, match="report_flops"):
        meter.track(lambda x: x)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None, np.float64(2.0)])
def test_report_flops_refuses_anything_but_a_non_negative_int(bad, meter: FlopMeter) -> None:
    with pytest.raises(LearnerError, match=r"must be an int in \[0, inf\)"):
        meter.report_flops(bad)
    assert meter.reported == 0


def test_report_flops_adds_and_sets_the_source(meter: FlopMeter) -> None:
    assert meter.source == "measured" and meter.total == 0
    meter.report_flops(0)
    meter.report_flops(np.int64(40))
    assert (meter.reported, meter.total, meter.source) == (40, 40, "reported")
    layer = meter.track(nn.Linear(3, 2))
    with torch.no_grad():
        layer(torch.randn(1, 3))
    assert (meter.measured, meter.total, meter.source) == (12, 52, "mixed")


def test_a_ddp_wrapper_is_measured_through_its_module(meter: FlopMeter, tmp_path, monkeypatch) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    # Gloo on the loopback device, with a deadline: a machine whose host name resolves to an
    # unreachable address must fail this test, never hang the suite.
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(
        "gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1, timeout=timedelta(seconds=60)
    )
    ddp = None
    try:
        ddp = meter.track(nn.parallel.DistributedDataParallel(nn.Linear(6, 4)))
        ddp(torch.randn(5, 6)).sum().backward()
        assert meter.snapshot() == FlopCounts(2 * 5 * 6 * 4, 2 * 5 * 6 * 4, 0, 1)
        assert meter.fallbacks == ()
    finally:
        meter.untrack_all()
        # The wrapper goes before the group: freed after it, its reducer destroyed the last
        # reference to the gloo group, whose destructor then waited forever on its threads
        # (seen once in CI: the suite hung here).
        del ddp
        gc.collect()
        dist.destroy_process_group()


def test_a_new_model_of_the_same_architecture_costs_no_dry_run(meter: FlopMeter) -> None:
    x = cnn_batch(4)[0]
    meter.track(SmallCNN(classes=5))(x)
    second = FlopMeter()
    second.track(SmallCNN(classes=5))(x)  # the next trial's fresh model
    third = FlopMeter()
    third.track(SmallCNN(classes=7))(x)  # another head size: another architecture
    assert (meter.measurements, second.measurements, third.measurements) == (1, 0, 1)
    assert second.measured == meter.measured != third.measured
    second.untrack_all()
    third.untrack_all()


def test_settings_that_are_not_parameters_are_part_of_the_architecture(meter: FlopMeter) -> None:
    x = torch.randn(2, 3, 16, 16)
    stride1 = meter.track(nn.Conv2d(3, 4, 3, stride=1))
    stride1(x)
    other = FlopMeter()
    other.track(nn.Conv2d(3, 4, 3, stride=2))(x)  # same weights' shape, a quarter of the work
    assert other.measurements == 1
    assert 3.5 < meter.measured / other.measured < 4.5
    other.untrack_all()
