"""FLOP accounting for learner code: :class:`FlopMeter` backs ``ctx.track`` and ``ctx.report_flops``.

Contract. Every call ``module(...)`` of a module passed to :meth:`FlopMeter.track` adds its
forward FLOPs, and every backward pass that reaches its outputs adds its backward FLOPs, as
``torch.utils.flop_counter.FlopCounterMode`` counts them (matmuls, convolutions, attention;
one multiply-add = 2 FLOPs; element-wise ops, norms and the optimiser are not counted). The
total equals what one ``FlopCounterMode`` around the whole run would count for those calls.

Untracked calls. While a meter *watches* (:meth:`FlopMeter.watch`, which the learner host
does for the whole of a trial and of a prediction job), every other outermost call of any
torch module is counted too, with the same keys and dry runs, so a network the learner forgot
(or declined) to pass to ``ctx.track`` is not free. It is caught by a process-wide forward
pre-hook (``register_module_forward_pre_hook``) that is installed only *between* outermost
calls: on a call it removes itself, so the modules called inside run torch's hook-free fast
path, and hangs a one-off exit hook on the called module that charges the call and puts the
pre-hook back. The part of :attr:`FlopMeter.measured` that came from untracked calls is kept
apart in :attr:`FlopMeter.untracked` (provenance; the total is charged either way). A module
tracked by any meter is counted by its own hooks, never twice. A module whose dry run fails
on ``meta`` and on a real copy is not an error when untracked: it is listed in
:attr:`FlopMeter.unmeasured` and looked through from then on (its submodule calls count as
outermost ones).

Cost. A call's FLOPs depend only on its *key*: the tracked module, the shapes, dtypes and
``requires_grad`` of every tensor argument (nested in tuples, lists and dicts; other scalar
arguments by value, other objects by type), ``torch.is_grad_enabled()``, the ``training``
flag of every submodule, which parameters require grad (frozen layers skip their weight
gradients) and the module's structure (parameter shapes; re-read whenever any module
registers a parameter or submodule, e.g. a new head). The first call with a new key is
measured once by a *dry run* of a copy of the module on the ``meta`` device (no real compute,
no memory, no effect on the real module or the random-number generators): forward, then
backward from all outputs that require grad. Dry runs are hidden from any enclosing dispatch
mode (an outer ``FlopCounterMode`` does not see them); DDP and DataParallel wrappers are
measured through their inner module. Later calls cost a dict lookup and an add, without
entering any dispatch mode (the hooks take 11-19 us per call for the small CNN, 34-43 us for
ResNet-34, on 2026-12-04 on a 2-core machine at load 10-16; an untracked call costs about the
same, and watching adds a few us per outermost call whatever the module's size; a dry run
takes tens of milliseconds, most of it torch's meta kernels). Over the 200 training steps and
evaluation pass of ``bench/bench_flops.py`` that is +0.5-0.6 % of CPU time tracked, +0.7-0.8 %
watched, most of it the run's three dry runs; the script prints the current figures.

Nesting. Only the outermost counted call is counted: a module that runs inside another
counted module's call (tracked or not) is already part of the outer dry run, so tracking both
a model and its head, or a model and a wrapper around it, or calling a tracked model inside an
untracked one, never counts anything twice.

Limits (each documented rather than guessed at):
- a backward that reaches any output of a call is charged the backward of all its outputs
  (exact when outputs share their compute, as logits and features do);
- ``torch.autograd.grad`` with a subset of inputs is charged as a full backward;
- compute whose cost depends on tensor *values* (data-dependent shapes) is charged as the
  first call with the same key;
- a module whose dry run fails on ``meta`` (an unsupported op, a plain tensor attribute) is
  measured once per key on a real copy on its own device instead (listed in
  :attr:`FlopMeter.fallbacks`); that copy costs one extra real forward and backward, which
  is harness work and not charged to the learner;
- calls of ``module.forward(...)`` bypass hooks and are not counted: call the module (while
  watching, the module calls made inside such a ``forward`` or inside a plain method such as
  ``model.features(x)`` are still counted; functional code outside any module call is not);
- a ``BaseException`` other than ``Exception`` (KeyboardInterrupt) raised through a watched
  call stops untracked counting until the next :meth:`FlopMeter.watch`;
- module calls in a process forked while watching (DataLoader workers) are not counted;
- a parameter's shape changed through ``.data`` (no parameter registered), or a plain setting
  (stride, a flag the forward reads) changed after the first call, is charged as before the
  change until the next registration: what the meter checks per call is kept to what can
  change without one (grad mode, ``training`` flags, ``requires_grad``, the arguments);
- ``scaled_dot_product_attention`` on CPU runs a kernel that ``FlopCounterMode`` leaves
  uncounted, while the dry run on ``meta`` takes its math path and counts its two matmuls:
  there the meter charges more than a ``FlopCounterMode`` around the real run (torch's CUDA
  attention kernels have FLOP formulas; not checked here on a GPU).
Copies and pickles of a tracked module are not tracked (their hooks become inert).

Purpose. NEVIS'22 counts the FLOPs of training updates only; the headline cFLOP (METRICS.md)
counts every pass. :attr:`FlopMeter.updates` is the first: every backward, the forward calls
made with gradients on, and what the learner reports (whose purpose the meter cannot see, so
it is counted as training). Forward calls with gradients off (``torch.no_grad``,
``inference_mode``: validation, transfer selection, prediction) are kept apart in
:attr:`FlopMeter.no_grad`. The rule reads the autograd mode, which is machine-independent.
"""

from __future__ import annotations

import dataclasses
import numbers
import weakref
from typing import Any, Literal, TypeVar

from torch import nn

from services.core.errors import LearnerError
from workers.sandbox.metering.flop_counter import (
    CALLS,
    OWNERS,
    CallCounter,
    Enter,
    MeterFigures,
    install_structure_hooks,
)
from workers.sandbox.metering.flop_watch import UntrackedCalls

FlopSource = Literal["measured", "reported", "mixed"]
ModuleT = TypeVar("ModuleT", bound=nn.Module)


@dataclasses.dataclass(frozen=True)
class FlopCounts:
    """A snapshot of a meter: measured forward/backward FLOPs and learner-reported FLOPs.

    ``untracked`` is the part of the measured FLOPs that came from modules the learner did
    not pass to ``ctx.track`` (already included in ``forward`` and ``backward``).
    """

    forward: int
    backward: int
    reported: int
    measurements: int
    untracked: int = 0
    no_grad: int = 0  # the part of ``forward`` made with gradients off

    @property
    def updates(self) -> int:
        """FLOPs of training updates, as NEVIS'22 counts them (see :class:`FlopMeter`)."""
        return self.measured - self.no_grad + self.reported

    @property
    def measured(self) -> int:
        return self.forward + self.backward

    @property
    def total(self) -> int:
        return self.measured + self.reported

    @property
    def source(self) -> FlopSource:
        """ "reported" if only the learner's figures are non-zero, "mixed" if both are,
        else "measured" (including an all-zero meter: the harness's count stands)."""
        if self.reported == 0:
            return "measured"
        return "reported" if self.measured == 0 else "mixed"


class FlopMeter(MeterFigures):
    """Counts the FLOPs of tracked torch modules and adds FLOPs the learner reports.

    One meter per trial (or prediction job). Not thread-safe. While it watches
    (:meth:`watch`) it also counts the outermost calls of every other torch module in this
    process. Call :meth:`untrack_all` when the trial ends (it also ends the watch); a module
    still tracked by an earlier meter moves to the meter that tracks it next, so a model kept
    in learner state is counted by the current trial only.
    """

    def __init__(self) -> None:
        super().__init__()
        self._reported = 0
        self._stack = CALLS
        self._tracked: dict[int, tuple[weakref.ref, tuple[Any, ...]]] = {}
        self._untracked_calls = UntrackedCalls(self)

    def track(self, module: ModuleT) -> ModuleT:
        """Count every forward and backward pass of ``module`` from now on; returns it.

        Raises:
            LearnerError: ``module`` is not a ``torch.nn.Module``.
        """
        if not isinstance(module, nn.Module):
            raise LearnerError(
                f"ctx.track expects a torch.nn.Module; got {type(module).__name__}. "
                "Learners in other frameworks call ctx.report_flops(n) instead."
            )
        key = id(module)
        mine = self._tracked.get(key)
        if mine is not None and mine[0]() is module:
            return module
        owner = OWNERS.get(key)
        if owner is not None and owner[0]() is module and owner[1]() is not None:
            owner[1]()._release(key)  # noqa: SLF001
        install_structure_hooks()
        handles = (
            module.register_forward_pre_hook(Enter(self._stack), prepend=True),
            module.register_forward_hook(CallCounter(self), with_kwargs=True, always_call=True),
        )
        self._tracked[key] = (weakref.ref(module), handles)
        OWNERS[key] = (weakref.ref(module), weakref.ref(self))
        return module

    def watch(self) -> FlopMeter:
        """Also count every outermost call of a module that no meter tracks, until
        :meth:`unwatch` or :meth:`untrack_all`; returns the meter.

        Call it between module calls (the learner host does, around a trial or a prediction
        job). The newest watching meter is charged; when it stops, the previous one resumes.
        """
        self._untracked_calls.start()
        return self

    def unwatch(self) -> None:
        """Stop counting untracked calls (tracked modules still count); the figures stay."""
        self._untracked_calls.stop()

    @property
    def watching(self) -> bool:
        """Whether untracked calls are charged to this meter now."""
        return self._untracked_calls.charged

    def untrack_all(self) -> None:
        """Remove this meter's hooks from every module it tracks and end its watch (the
        counts stay)."""
        self.unwatch()
        for key in list(self._tracked):
            self._release(key)

    def _release(self, key: int) -> None:
        _, handles = self._tracked.pop(key)
        for handle in handles:
            handle.remove()
        owner = OWNERS.get(key)
        if owner is not None and owner[1]() is self:
            del OWNERS[key]

    def report_flops(self, flops: int) -> None:
        """Add FLOPs the learner measured itself (frameworks other than PyTorch).

        Raises:
            LearnerError: ``flops`` is not an int in [0, inf).
        """
        if not isinstance(flops, numbers.Integral) or isinstance(flops, bool) or flops < 0:
            raise LearnerError(
                f"The 'flops' parameter of report_flops must be an int in [0, inf). Got {flops!r} instead."
            )
        self._reported += int(flops)

    @property
    def measured(self) -> int:
        """FLOPs of counted forward and backward passes, tracked and untracked."""
        return self._forward + self._backward

    @property
    def untracked(self) -> int:
        """The part of :attr:`measured` that came from modules no meter tracked."""
        return self._untracked

    @property
    def reported(self) -> int:
        return self._reported

    @property
    def no_grad(self) -> int:
        """The part of :attr:`measured` from forward calls made with gradients off."""
        return self._no_grad

    @property
    def updates(self) -> int:
        """FLOPs of training updates (NEVIS'22's count): :attr:`total` less :attr:`no_grad`."""
        return self.total - self._no_grad

    @property
    def total(self) -> int:
        return self.measured + self._reported

    @property
    def source(self) -> FlopSource:
        """See :attr:`FlopCounts.source`."""
        return self.snapshot().source

    @property
    def measurements(self) -> int:
        """Dry runs so far: one per distinct key (harness overhead, not charged)."""
        return self._measurements

    @property
    def fallbacks(self) -> tuple[str, ...]:
        """Modules measured on a real copy because the meta dry run failed, with the reason."""
        return tuple(self._fallbacks)

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """Untracked modules no copy of which could run, with the reason: their own calls
        are looked through (the module calls inside them are counted instead)."""
        return tuple(self._untracked_calls.unmeasured)

    def snapshot(self) -> FlopCounts:
        return FlopCounts(
            self._forward, self._backward, self._reported, self._measurements, self._untracked, self._no_grad
        )

    def reset(self) -> None:
        """Zero the FLOP figures; measured keys stay cached (their counts remain valid).

        A backward that runs after ``reset`` through a call made before it is charged after.
        """
        self._forward = self._backward = self._reported = self._untracked = self._no_grad = 0


__all__ = ["FlopCounts", "FlopMeter", "FlopSource", "ModuleT"]
