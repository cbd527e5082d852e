"""FLOPs that cannot be dodged by not tracking: while a meter watches, torch modules the
learner never passed to ``ctx.track`` are counted too, outermost calls only, never twice, and
kept apart as the meter's ``untracked`` share."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from services.core.errors import LearnerError
from services.store.runs.outcomes import TrialOutcome
from workers.learners.models import SmallCNN
from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.context import LocalTrialContext
from workers.sandbox.learner_calls import predict
from workers.sandbox.messages import flop_fields
from workers.sandbox.metering.flop_counter import forget_process_counts
from workers.sandbox.metering.flops import FlopCounts, FlopMeter


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    forget_process_counts()  # each test sees its own dry runs
    yield
    torch.set_num_threads(before)


@pytest.fixture
def meter() -> Iterator[FlopMeter]:
    m = FlopMeter().watch()
    yield m
    m.untrack_all()


def reference(fn, *args) -> int:
    """What one FlopCounterMode around ``fn(*args)`` counts (charged to a throwaway meter
    if one is watching: the newest watching meter is charged, then the previous resumes)."""
    sink = FlopMeter().watch()
    try:
        with FlopCounterMode(display=False) as counter:
            fn(*args)
    finally:
        sink.untrack_all()
    return counter.get_total_flops()


def no_watch_hooks_left(*modules: nn.Module) -> bool:
    """Nothing of the watch is left in torch's global or the modules' hook dicts."""
    hooks = nn.modules.module._global_forward_pre_hooks
    return not hooks and all(not m._forward_hooks and not m._forward_pre_hooks for m in modules)


# --- a learner-like loop, with and without ctx.track -------------------------------------


def learner_loop(ctx: LocalTrialContext, model: nn.Module, track: bool) -> None:
    """Train (with a loss module), validate under no_grad, freeze the body, train again,
    and take features through a bare method call, as a learner's ``train`` would."""
    gen = torch.Generator().manual_seed(0)
    net = ctx.track(model) if track else model
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def epoch() -> None:
        for b in (16, 16, 7):
            x, y = torch.randn(b, 3, 16, 16, generator=gen), torch.randint(0, 5, (b,), generator=gen)
            loss = loss_fn(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ctx.progress(1, None, loss=float(loss.detach()))

    model.train()
    epoch()
    model.eval()
    with torch.no_grad():
        for b in (16, 9):
            net(torch.randn(b, 3, 16, 16, generator=gen))
    for p in model.body.parameters():
        p.requires_grad_(False)
    model.train()
    epoch()
    for p in model.body.parameters():
        p.requires_grad_(True)
    with torch.no_grad():
        model.features(torch.randn(4, 3, 16, 16, generator=gen))  # a method: its body is a module call


def make_context() -> LocalTrialContext:
    return LocalTrialContext(seed=0, steps=10, save_predictor=lambda p: b"")


def test_a_loop_that_never_tracks_is_charged_as_one_that_does() -> None:
    torch.manual_seed(0)
    model = SmallCNN(5, width=4)
    runs = {}
    for track in (True, False):
        ctx = make_context()
        ctx.meter.watch()  # what the learner host does for a trial
        try:
            learner_loop(ctx, copy.deepcopy(model), track)
        finally:
            ctx.meter.untrack_all()
        runs[track] = ctx.meter
    expected = reference(learner_loop, make_context(), copy.deepcopy(model), False)
    tracked, untracked = runs[True], runs[False]
    assert abs(untracked.measured - tracked.measured) <= 0.01 * tracked.measured
    assert untracked.measured == tracked.measured == expected > 0
    assert untracked.untracked == untracked.measured  # all of it came from untracked calls
    # Tracked run: the loss module is untracked but costs no FLOPs; ``model.features`` is a
    # method, not a call of the tracked model, so its body's call counts as untracked.
    with torch.no_grad():
        body = reference(copy.deepcopy(model).body, torch.randn(4, 3, 16, 16))
    assert tracked.untracked == body > 0
    assert untracked.snapshot().untracked == untracked.untracked and untracked.unmeasured == ()


def test_without_a_watch_untracked_modules_are_free() -> None:
    ctx = make_context()
    learner_loop(ctx, SmallCNN(5, width=4), track=False)
    assert ctx.meter.measured == 0 and no_watch_hooks_left()


# --- nesting -----------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8), nn.Tanh()))
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def train_step(model: nn.Module, x: torch.Tensor) -> None:
    model(x).square().mean().backward()


def test_nested_untracked_calls_are_counted_once(meter: FlopMeter) -> None:
    model, x = Net(), torch.randn(5, 6)
    expected = reference(train_step, copy.deepcopy(model), x)
    forget_process_counts()  # the throwaway meter of ``reference`` measured this key
    train_step(model, x)
    train_step(model, x)  # the same key again: no new dry run
    assert meter.measured == meter.untracked == 2 * expected
    assert meter.measurements == 1  # only the outermost call was measured
    assert len(nn.modules.module._global_forward_pre_hooks) == 1  # waiting for the next call
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


class Wrapper(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.extra = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.extra(self.inner(x))


def test_a_tracked_module_inside_an_untracked_one_is_counted_once(meter: FlopMeter) -> None:
    inner = meter.track(Net())
    outer, x = Wrapper(inner), torch.randn(4, 6)
    expected = reference(train_step, copy.deepcopy(outer), x)
    train_step(outer, x)
    assert meter.measured == expected  # the outer call holds the inner one
    assert meter.untracked == expected
    train_step(inner, x)  # on its own, the tracked module counts as tracked
    assert meter.measured == expected + reference(train_step, copy.deepcopy(inner), x)
    assert meter.untracked == expected


def test_an_untracked_module_inside_a_tracked_one_is_counted_once(meter: FlopMeter) -> None:
    inner = Net()
    outer, x = meter.track(Wrapper(inner)), torch.randn(4, 6)
    expected = reference(train_step, copy.deepcopy(outer), x)
    train_step(outer, x)
    assert meter.measured == expected and meter.untracked == 0
    train_step(inner, x)  # on its own, the untracked module counts as untracked
    alone = reference(train_step, copy.deepcopy(inner), x)
    assert (meter.measured, meter.untracked) == (expected + alone, alone)


class Recursive(nn.Module):
    """Calls itself: only the outermost call is charged."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, depth: int = 2) -> torch.Tensor:
        x = self.lin(x)
        return self(x, depth - 1) if depth > 0 else x


def test_a_module_that_calls_itself_is_charged_its_outermost_call(meter: FlopMeter) -> None:
    model, x = Recursive(), torch.randn(3, 4)
    with torch.no_grad():
        model(x)
        model(x)
    assert meter.measured == 2 * (3 * 2 * 3 * 4 * 4)  # two calls of three linear layers each
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


class FailsOnce(nn.Module):
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


def test_a_failed_untracked_call_is_not_charged_and_counting_goes_on(meter: FlopMeter) -> None:
    model = FailsOnce()
    with pytest.raises(ValueError, match="transient"):
        model(torch.randn(2, 3))
    assert meter.measured == 0
    with torch.no_grad():
        model(torch.randn(2, 3))
        nn.Linear(3, 3)(torch.randn(2, 3))
    assert meter.measured == 2 * (2 * 2 * 3 * 3)


class Unmeasurable(nn.Module):
    """Cannot be copied (a lock), so no dry run of it can run: it is looked through."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.lin = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.lock:
            return self.lin(x)


def test_an_untracked_module_that_cannot_be_copied_is_looked_through(meter: FlopMeter) -> None:
    model = Unmeasurable()
    with torch.no_grad():
        model(torch.randn(3, 4))  # its own call cannot be measured: listed, not an error
        model(torch.randn(3, 4))  # from now on its linear layer is the outermost call
    assert len(meter.unmeasured) == 1 and meter.unmeasured[0].startswith("Unmeasurable")
    assert meter.measured == meter.untracked == 2 * 3 * 4 * 2


def test_tracking_an_uncopyable_module_still_fails_loudly(meter: FlopMeter) -> None:
    model = meter.track(Unmeasurable())
    with pytest.raises(LearnerError, match="report its FLOPs"):
        model(torch.randn(3, 4))


# --- lifetime and ownership --------------------------------------------------------------


def test_calls_outside_the_watch_are_not_counted() -> None:
    layer, x = nn.Linear(3, 2), torch.randn(1, 3)
    meter = FlopMeter()
    with torch.no_grad():
        layer(x)  # before the watch
        meter.watch()
        assert meter.watching
        layer(x)
        meter.untrack_all()  # the trial ends
        layer(x)
        nn.Linear(3, 2)(x)
    assert (meter.measured, meter.untracked, meter.watching) == (12, 12, False)
    assert no_watch_hooks_left(layer)


def test_the_newest_watching_meter_is_charged_and_the_previous_resumes() -> None:
    first, second = FlopMeter().watch(), FlopMeter()
    layer, x = nn.Linear(3, 2), torch.randn(1, 3)
    try:
        with torch.no_grad():
            layer(x)
            second.watch()
            layer(x)
            second.unwatch()
            layer(x)
            second.untrack_all()
    finally:
        first.untrack_all()
    with torch.no_grad():
        layer(x)
    assert (first.untracked, second.untracked) == (24, 12)
    assert no_watch_hooks_left(layer)


def test_a_module_tracked_by_another_meter_is_charged_to_that_meter(meter: FlopMeter) -> None:
    other = FlopMeter()
    layer = other.track(nn.Linear(3, 2))
    with torch.no_grad():
        layer(torch.randn(1, 3))
    other.untrack_all()
    with torch.no_grad():
        layer(torch.randn(1, 3))  # released: now an untracked module of the watching meter
    assert (other.measured, other.untracked) == (12, 0)
    assert (meter.measured, meter.untracked) == (12, 12)


def test_reset_zeroes_the_untracked_share(meter: FlopMeter) -> None:
    with torch.no_grad():
        nn.Linear(3, 2)(torch.randn(1, 3))
    meter.reset()
    assert meter.snapshot() == FlopCounts(0, 0, 0, 1, 0)


# --- the host and the harness carry the split -------------------------------------------

LEARNER_SOURCE = '''
import numpy as np, torch
from workers.learners.protocol import Resources, Uniform

class Forgetful:
    """Predicts with a linear layer it never passes to ctx.track."""
    name = "forgetful"
    def search_space(self): return {"x": Uniform(0.0, 1.0)}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx):
        torch.manual_seed(0)
        with torch.no_grad():
            return torch.nn.Linear(48, 2)(torch.as_tensor(images).float().reshape(len(images), -1)).numpy()
    def features(self, predictor, images, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Forgetful()
'''

INFO = TaskInfo(
    order=1,
    key="t",
    dataset="t",
    title="t",
    year=2000,
    domain=None,
    kind="single",
    num_classes=2,
    class_names=("a", "b"),
    image_size=4,
    num_train=0,
    num_dev=0,
)


def test_a_prediction_job_in_the_host_reports_its_untracked_flops(tmp_path: Path) -> None:
    (tmp_path / "nevis_forgetful.py").write_text(LEARNER_SOURCE)
    with LearnerHost(HostSpec("nevis_forgetful:make", import_paths=(str(tmp_path),), sandbox="none")) as host:
        scores, flops = predict(host, INFO, b"p", np.zeros((3, 4, 4, 3), np.uint8), seed=0)
    assert scores.shape == (3, 2)
    assert flops == {"flops_measured": 2 * 3 * 48 * 2, "flops_reported": 0, "flops_untracked": 2 * 3 * 48 * 2}


def test_the_harness_checks_and_keeps_the_split() -> None:
    counts = flop_fields({"flops_measured": 10, "flops_reported": 2, "flops_untracked": 4})
    assert counts == {"flops_measured": 10, "flops_reported": 2, "flops_untracked": 4}
    assert flop_fields({"flops_measured": 10, "flops_reported": 0})["flops_untracked"] == 0  # an older host
    with pytest.raises(LearnerError, match="exceed"):
        flop_fields({"flops_measured": 3, "flops_reported": 0, "flops_untracked": 4})
    with pytest.raises(LearnerError, match="flops_untracked"):
        flop_fields({"flops_measured": 3, "flops_reported": 0, "flops_untracked": -1})
    outcome = TrialOutcome.from_metrics({"trial_index": 0, "seed": 1, "status": "ok", "dev_error": 0.5, **counts})
    assert (outcome.flops, outcome.flops_untracked, outcome.flops_source) == (12, 4, "reported")


def test_functional_code_is_still_not_counted(meter: FlopMeter) -> None:
    w = torch.randn(3, 4)
    F.linear(torch.randn(2, 4), w)  # no module call: the documented limit
    assert meter.measured == 0
