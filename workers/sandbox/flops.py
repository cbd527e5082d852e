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
measured through their inner module. Later calls cost a dict lookup and an add (about 6 us
per call for the small CNN, 17 us for ResNet-34; an untracked call costs
about the same, and watching adds a few us per outermost call whatever the module's size;
``bench/bench_flops.py`` prints the current figures; a dry run takes tens of milliseconds).

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
- module calls in a process forked while watching (DataLoader workers) are not counted.
Copies and pickles of a tracked module are not tracked (their hooks become inert).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.hooks import RemovableHandle

from services.core.errors import LearnerError
from workers.sandbox.flop_keys import cuda_indices, dry_run, signature, tensors_of

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

    @property
    def measured(self) -> int:
        return self.forward + self.backward

    @property
    def total(self) -> int:
        return self.measured + self.reported

    @property
    def source(self) -> FlopSource:
        """"reported" if only the learner's figures are non-zero, "mixed" if both are,
        else "measured" (including an all-zero meter: the harness's count stands)."""
        if self.reported == 0:
            return "measured"
        return "reported" if self.measured == 0 else "mixed"


# --- structure version: bumped when any module registers a parameter or submodule --------


class _Structure:
    version = 0
    installed = False


def _bump(*_: Any) -> None:
    _Structure.version += 1


def _install_structure_hooks() -> None:
    if not _Structure.installed:  # global and permanent: a counter increment per registration
        nn.modules.module.register_module_parameter_registration_hook(_bump)
        nn.modules.module.register_module_module_registration_hook(_bump)
        _Structure.installed = True


# Counted calls running now, outermost first, shared by every meter (``None``: a dry run). A
# call made while this is not empty is part of the outer call and is not counted on its own.
_CALLS: list[nn.Module | None] = []


# --- hooks of tracked modules ------------------------------------------------------------


class _Inert:
    """What a tracked module's hooks become in its copies and pickles: nothing."""

    def __call__(self, *_: Any) -> None:
        return None


class _Hook:
    def __deepcopy__(self, memo: dict) -> _Inert:
        return _Inert()

    def __reduce__(self) -> tuple:
        return (_Inert, ())


class _Enter(_Hook):
    """Forward pre-hook: marks a tracked call as running (so nested tracked calls skip)."""

    def __init__(self, stack: list) -> None:
        self.stack = stack

    def __call__(self, module: nn.Module, args: tuple) -> None:
        self.stack.append(module)


class _Count(_Hook):
    """Charges the calls of one module to one meter, measuring each new key once.

    As a tracked module's forward hook (always called) it charges the call when it is the
    outermost counted one; :meth:`charge` is what the watch calls for an untracked module.
    """

    def __init__(self, meter: FlopMeter, *, untracked: bool = False) -> None:
        self.meter = meter
        self.untracked = untracked
        self.stack = _CALLS
        self.cache: dict[Any, tuple[int, int, Callable | None]] = {}
        self.structures: dict[Any, int] = {}
        self.version = -1
        self.mods: tuple[nn.Module, ...] = ()
        self.params: tuple[nn.Parameter, ...] = ()
        self.structure = 0

    def __call__(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        stack = self.stack
        if not stack or stack[-1] is not module:
            return None  # the call failed before our pre-hook ran
        stack.pop()
        if stack:
            return None  # inside another counted call (or a dry run), which counts it
        if output is None and sys.exc_info()[1] is not None:
            return None  # forward raised: nothing to charge
        self.charge(module, args, kwargs, output)
        return None

    def charge(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        """Add the call's forward FLOPs now and hook its backward onto ``output``."""
        if self.version != _Structure.version:
            self._refresh(module)
        if kwargs:
            sig = signature((args, kwargs))
        elif len(args) == 1 and type(args[0]) is torch.Tensor:
            x = args[0]
            sig = (x.shape, x.dtype, x.requires_grad)
        else:
            sig = signature(args)
        grad = torch.is_grad_enabled()
        key = (grad, tuple([m.training for m in self.mods]),
               tuple([p.requires_grad for p in self.params]), self.structure, sig)
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = self._lookup_or_measure(key, module, args, kwargs, grad)
        meter = self.meter
        meter._forward += entry[0]
        if self.untracked:
            meter._untracked += entry[0]
        charge = entry[2]
        if charge is not None:
            if type(output) is torch.Tensor:
                if output.requires_grad:
                    output.register_hook(charge)
            else:
                roots = [t for t in tensors_of(output) if t.requires_grad]
                if len(roots) == 1:
                    roots[0].register_hook(charge)
                elif roots:  # once per backward pass, whichever outputs it reaches
                    torch.autograd.graph.register_multi_grad_hook(roots, charge, mode="any")

    def _refresh(self, module: nn.Module) -> None:
        self.mods = tuple(module.modules())
        self.params = tuple(module.parameters())
        shape = tuple(_module_signature(m) for m in self.mods)
        self.structure = self.structures.setdefault(shape, len(self.structures))
        self.structure_signature = shape
        self.version = _Structure.version

    def _lookup_or_measure(self, key: tuple, module: nn.Module, args: tuple, kwargs: dict, grad: bool) -> tuple:
        """Counts for ``key``: from the process-wide table if an identical module was measured
        (a new model of the same architecture in the next trial), else by a dry run."""
        shared_key = (*key[:3], self.structure_signature, key[4])
        known = _PROCESS_COUNTS.get(shared_key)
        if known is None:
            entry = self._measure(module, args, kwargs, grad)
            _PROCESS_COUNTS[shared_key] = entry[:2]
            return entry
        forward, backward = known
        return (forward, backward, self._charger(backward))

    def _charger(self, backward: int) -> Callable | None:
        """The backward hook that charges this meter ``backward`` FLOPs."""
        if not backward:
            return None
        meter = self.meter
        if self.untracked:
            def charge_untracked(_grad: Any, _n: int = backward) -> None:
                meter._backward += _n
                meter._untracked += _n

            return charge_untracked

        def charge(_grad: Any, _n: int = backward) -> None:
            meter._backward += _n

        return charge

    def _measure(self, module: nn.Module, args: tuple, kwargs: dict, grad: bool) -> tuple:
        meter = self.meter
        self.stack.append(None)  # tracked modules reached by the dry run count as nested
        try:
            with _disable_current_modes(), torch.inference_mode(False):
                with torch.random.fork_rng(devices=cuda_indices(module, args)):
                    try:
                        forward, backward = dry_run(module, args, kwargs, grad, on_meta=True)
                    except Exception as meta_error:  # any op without a meta kernel lands here
                        try:
                            forward, backward = dry_run(module, args, kwargs, grad, on_meta=False)
                        except Exception as exc:
                            raise LearnerError(
                                f"Cannot measure the FLOPs of tracked module {type(module).__name__}: "
                                f"a copy fails on the meta device ({meta_error}) and on its own "
                                f"device ({exc}). Make the module deep-copyable, or stop tracking it "
                                "and report its FLOPs with ctx.report_flops."
                            ) from exc
                        meter._fallbacks.append(f"{type(module).__name__}: {meta_error}"[:300])
        finally:
            self.stack.pop()
        meter._measurements += 1
        return (forward, backward, self._charger(backward))


# --- the watch: untracked outermost calls ------------------------------------------------
#
# Hook dicts are torch's own (``Module._forward_hooks`` ...): the watch adds and removes its
# entries directly, under ids reserved from torch's handle counter, because it does so twice
# per outermost call and a handle object per call would cost more than the rest together.

_GLOBAL_PRE_HOOKS = nn.modules.module._global_forward_pre_hooks


def _reserved_hook_id() -> int:
    """A hook id torch will never hand out again (its handle counter moves past it)."""
    return RemovableHandle(OrderedDict()).id


_OUTER_ID, _DEPTH_ID, _EXIT_ID = _reserved_hook_id(), _reserved_hook_id(), _reserved_hook_id()
_TRACKED = object()  # the running outermost call is of a tracked module: its own hooks count it
_NEW = object()  # an untracked module this meter has not seen yet
_OPAQUE = object()  # an untracked module that cannot be measured: looked through


class _Watch:
    """Process-wide state of the watch (learner code runs in one thread of one process)."""

    meters: list[FlopMeter] = []  # watching meters; the newest one is charged
    call: list[Any] | None = None  # [module, meter, counter, depth] of the running outermost call


def _outer_enter(module: nn.Module, args: tuple) -> None:
    """Global forward pre-hook, installed only between outermost calls: claims this call."""
    if _CALLS or _Watch.call is not None or not _Watch.meters:
        return None  # inside a call that counts (begun before watching) or a dry run
    meter = _Watch.meters[-1]
    key = id(module)
    owner = _OWNERS.get(key)
    counter: Any
    if owner is not None and owner[0]() is module:
        counter = _TRACKED
    else:
        entry = meter._untracked_counters.get(key)
        counter = _NEW if entry is None or entry[0]() is not module else entry[1]
        if counter is _OPAQUE:
            return None  # not measurable as a whole: the calls inside it are the outermost ones
        _CALLS.append(module)  # tracked modules called inside this call are part of it
    _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)  # calls inside this one take torch's hook-free path
    _Watch.call = [module, meter, counter, 0]
    try:
        module._forward_pre_hooks[_DEPTH_ID] = _OUTER_DEPTH
        module._forward_hooks[_EXIT_ID] = _OUTER_EXIT
        module._forward_hooks_with_kwargs[_EXIT_ID] = True
        module._forward_hooks_always_called[_EXIT_ID] = True
    except Exception:  # noqa: BLE001 - a module without torch's hook dicts: not counted
        _abandon_call()
        _resume()
    return None


class _OuterDepth(_Hook):
    """Pre-hook on the module of the running outermost call: counts calls of it inside it."""

    def __call__(self, module: nn.Module, args: tuple) -> None:
        call = _Watch.call
        if call is not None and call[0] is module:
            call[3] += 1


class _OuterExit(_Hook):
    """Forward hook (always called) on the module of the running outermost call: charges it
    if untracked, then reinstalls the global pre-hook for the next outermost call."""

    def __call__(self, module: nn.Module, args: tuple, kwargs: dict, output: Any = None) -> None:
        call = _Watch.call
        if call is None or call[0] is not module:
            return None  # a copy of the module made during the call, or a stale hook
        if call[3]:
            call[3] -= 1  # the end of a call of this module inside its own outermost call
            return None
        _Watch.call = None
        _detach(module)
        meter, counter = call[1], call[2]
        try:
            _CALLS.clear()  # this was the outermost call: whatever is left is an interrupted one's
            if counter is not _TRACKED and not (output is None and sys.exc_info()[1] is not None):
                meter._count_untracked(module, counter, args, kwargs, output)
        finally:
            _resume()
        return None


_OUTER_DEPTH, _OUTER_EXIT = _OuterDepth(), _OuterExit()


def _detach(module: nn.Module) -> None:
    module._forward_pre_hooks.pop(_DEPTH_ID, None)
    module._forward_hooks.pop(_EXIT_ID, None)
    module._forward_hooks_with_kwargs.pop(_EXIT_ID, None)
    module._forward_hooks_always_called.pop(_EXIT_ID, None)


def _resume() -> None:
    """Put the global pre-hook back if a meter watches and no outermost call is running."""
    if _Watch.meters and _Watch.call is None:
        _GLOBAL_PRE_HOOKS[_OUTER_ID] = _outer_enter


def _abandon_call() -> None:
    """Forget a running outermost call (one a BaseException cut short, or the watch's end)."""
    call, _Watch.call = _Watch.call, None
    if call is not None:
        _detach(call[0])
    _CALLS.clear()


def _stop_in_forked_child() -> None:
    """A forked child (a DataLoader worker) cannot charge the parent's meter: it stops."""
    _Watch.meters.clear()
    _Watch.call = None
    _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_stop_in_forked_child)


# --- the meter ---------------------------------------------------------------------------

# Counts measured in this process, by structural key: a module's architecture (see
# ``_module_signature``), modes and argument signature fully decide its FLOPs, so a fresh
# model of the same architecture (the next trial in a reused worker) costs no dry run.
_PROCESS_COUNTS: dict[tuple, tuple[int, int]] = {}
_SCALAR_TYPES = (bool, int, float, str)


def forget_process_counts() -> None:
    """Drop the process-wide counts, so the next call of every key is measured again."""
    _PROCESS_COUNTS.clear()


def _module_signature(module: nn.Module) -> tuple:
    """What decides one submodule's FLOPs besides its inputs: its type, its parameter and
    buffer shapes, and its plain scalar settings (stride, padding, groups, eps, ...)."""
    settings = tuple(sorted(
        (name, value) for name, value in vars(module).items()
        if not name.startswith("_") and name != "training" and (
            isinstance(value, _SCALAR_TYPES)
            or (isinstance(value, tuple) and all(isinstance(v, _SCALAR_TYPES) for v in value)))
    ))
    params = tuple((n, p.shape, p.dtype) for n, p in module._parameters.items() if p is not None)
    buffers = tuple((n, b.shape, b.dtype) for n, b in module._buffers.items() if b is not None)
    return (type(module), params, buffers, settings)

# id(module) -> (module, owning meter), weakly: a module is tracked by one meter at a time.
_OWNERS: dict[int, tuple[weakref.ref, weakref.ref]] = {}


class FlopMeter:
    """Counts the FLOPs of tracked torch modules and adds FLOPs the learner reports.

    One meter per trial (or prediction job). Not thread-safe. While it watches
    (:meth:`watch`) it also counts the outermost calls of every other torch module in this
    process. Call :meth:`untrack_all` when the trial ends (it also ends the watch); a module
    still tracked by an earlier meter moves to the meter that tracks it next, so a model kept
    in learner state is counted by the current trial only.
    """

    def __init__(self) -> None:
        self._forward = 0
        self._backward = 0
        self._reported = 0
        self._untracked = 0
        self._measurements = 0
        self._fallbacks: list[str] = []
        self._unmeasured: list[str] = []
        self._stack = _CALLS
        self._tracked: dict[int, tuple[weakref.ref, tuple[Any, ...]]] = {}
        self._untracked_counters: dict[int, tuple[weakref.ref, Any]] = {}

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
        owner = _OWNERS.get(key)
        if owner is not None and owner[0]() is module and owner[1]() is not None:
            owner[1]()._release(key)
        _install_structure_hooks()
        handles = (
            module.register_forward_pre_hook(_Enter(self._stack), prepend=True),
            module.register_forward_hook(_Count(self), with_kwargs=True, always_call=True),
        )
        self._tracked[key] = (weakref.ref(module), handles)
        _OWNERS[key] = (weakref.ref(module), weakref.ref(self))
        return module

    def watch(self) -> FlopMeter:
        """Also count every outermost call of a module that no meter tracks, until
        :meth:`unwatch` or :meth:`untrack_all`; returns the meter.

        Call it between module calls (the learner host does, around a trial or a prediction
        job). The newest watching meter is charged; when it stops, the previous one resumes.
        """
        _install_structure_hooks()
        if self in _Watch.meters:
            _Watch.meters.remove(self)
        else:
            _abandon_call()  # a call a BaseException cut short before: start clean
        _Watch.meters.append(self)
        _resume()
        return self

    def unwatch(self) -> None:
        """Stop counting untracked calls (tracked modules still count); the figures stay."""
        if self not in _Watch.meters:
            return
        _Watch.meters.remove(self)
        if not _Watch.meters:
            _abandon_call()
            _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)

    @property
    def watching(self) -> bool:
        """Whether untracked calls are charged to this meter now."""
        return bool(_Watch.meters) and _Watch.meters[-1] is self

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
        owner = _OWNERS.get(key)
        if owner is not None and owner[1]() is self:
            del _OWNERS[key]

    def _count_untracked(self, module: nn.Module, counter: Any, args: tuple, kwargs: dict, output: Any) -> None:
        """Charge one untracked outermost call (the watch's exit hook calls this)."""
        key = id(module)
        counters = self._untracked_counters
        if counter is _NEW:
            counter = _Count(self, untracked=True)
            ref = weakref.ref(module, lambda _ref, _key=key: counters.pop(_key, None))
            counters[key] = (ref, counter)
        try:
            counter.charge(module, args, kwargs, output)
        except Exception as exc:  # noqa: BLE001 - no copy of it runs: look through it from now on
            counters[key] = (counters[key][0], _OPAQUE)
            self._unmeasured.append(f"{type(module).__name__}: {exc}"[:300])

    def report_flops(self, flops: int) -> None:
        """Add FLOPs the learner measured itself (frameworks other than PyTorch).

        Raises:
            LearnerError: ``flops`` is not an int in [0, inf).
        """
        if not isinstance(flops, numbers.Integral) or isinstance(flops, bool) or flops < 0:
            raise LearnerError(
                "The 'flops' parameter of report_flops must be an int in [0, inf). "
                f"Got {flops!r} instead."
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
        return tuple(self._unmeasured)

    def snapshot(self) -> FlopCounts:
        return FlopCounts(self._forward, self._backward, self._reported, self._measurements, self._untracked)

    def reset(self) -> None:
        """Zero the FLOP figures; measured keys stay cached (their counts remain valid).

        A backward that runs after ``reset`` through a call made before it is charged after.
        """
        self._forward = self._backward = self._reported = self._untracked = 0


__all__ = ["FlopCounts", "FlopMeter", "FlopSource", "ModuleT", "forget_process_counts"]
