"""FLOP accounting for learner code: :class:`FlopMeter` backs ``ctx.track`` and ``ctx.report_flops``.

Contract. Every call ``module(...)`` of a module passed to :meth:`FlopMeter.track` adds its
forward FLOPs, and every backward pass that reaches its outputs adds its backward FLOPs, as
``torch.utils.flop_counter.FlopCounterMode`` counts them (matmuls, convolutions, attention;
one multiply-add = 2 FLOPs; element-wise ops, norms and the optimiser are not counted). The
total equals what one ``FlopCounterMode`` around the whole run would count for those calls.

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
per call for the small CNN, 17 us for ResNet-34; a dry run takes tens of milliseconds).

Nesting. Only the outermost tracked call is counted: a tracked module that runs inside another
tracked module's call is already part of the outer dry run, so tracking both a model and its
head, or a model and a wrapper around it, never counts anything twice.

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
- calls of ``module.forward(...)`` bypass hooks and are not counted: call the module.
Copies and pickles of a tracked module are not tracked (their hooks become inert).
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
import weakref
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from services.core.errors import LearnerError
from workers.sandbox.flop_keys import cuda_indices, dry_run, signature, tensors_of

FlopSource = Literal["measured", "reported", "mixed"]
ModuleT = TypeVar("ModuleT", bound=nn.Module)


@dataclasses.dataclass(frozen=True)
class FlopCounts:
    """A snapshot of a meter: measured forward/backward FLOPs and learner-reported FLOPs."""

    forward: int
    backward: int
    reported: int
    measurements: int

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


# --- hooks -------------------------------------------------------------------------------


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
    """Forward hook (always called): charges the call, measuring its key the first time."""

    def __init__(self, meter: FlopMeter) -> None:
        self.meter = meter
        self.stack = meter._stack
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
            return None  # inside another tracked call (or a dry run), which counts it
        if output is None and sys.exc_info()[1] is not None:
            return None  # forward raised: nothing to charge
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
        self.meter._forward += entry[0]
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
        return None

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

    One meter per trial (or prediction job). Not thread-safe. Call :meth:`untrack_all` when
    the trial ends; a module still tracked by an earlier meter moves to the meter that tracks
    it next, so a model kept in learner state is counted by the current trial only.
    """

    def __init__(self) -> None:
        self._forward = 0
        self._backward = 0
        self._reported = 0
        self._measurements = 0
        self._fallbacks: list[str] = []
        self._stack: list[nn.Module | None] = []
        self._tracked: dict[int, tuple[weakref.ref, tuple[Any, ...]]] = {}

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

    def untrack_all(self) -> None:
        """Remove this meter's hooks from every module it tracks (the counts stay)."""
        for key in list(self._tracked):
            self._release(key)

    def _release(self, key: int) -> None:
        _, handles = self._tracked.pop(key)
        for handle in handles:
            handle.remove()
        owner = _OWNERS.get(key)
        if owner is not None and owner[1]() is self:
            del _OWNERS[key]

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
        """FLOPs of tracked forward and backward passes."""
        return self._forward + self._backward

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

    def snapshot(self) -> FlopCounts:
        return FlopCounts(self._forward, self._backward, self._reported, self._measurements)

    def reset(self) -> None:
        """Zero the FLOP figures; measured keys stay cached (their counts remain valid).

        A backward that runs after ``reset`` through a call made before it is charged after.
        """
        self._forward = self._backward = self._reported = 0


__all__ = ["FlopCounts", "FlopMeter", "FlopSource", "ModuleT", "forget_process_counts"]
