"""How the FLOP meter charges one module's calls (the contract is in :mod:`workers.sandbox.metering.flops`).

Kept apart from the meter's public face and from the watch because every counted call, tracked
or not, runs through it: a :class:`CallCounter` builds the call's key, finds its counts in its
own cache, in the process-wide table or by a dry run, adds the forward FLOPs and hooks the
backward onto the call's outputs. Here too are the hooks a tracked module carries and the state
every meter shares: the running counted calls (:data:`CALLS`), who tracks which module
(:data:`OWNERS`) and the version of the modules' structure.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from services.core.errors import LearnerError
from workers.sandbox.metering.flop_keys import cuda_indices, dry_run, signature, tensors_of

# Counted calls running now, outermost first, shared by every meter (``None``: a dry run). A
# call made while this is not empty is part of the outer call and is not counted on its own.
CALLS: list[nn.Module | None] = []

# id(module) -> (module, owning meter), weakly: a module is tracked by one meter at a time.
OWNERS: dict[int, tuple[weakref.ref, weakref.ref]] = {}


class MeterFigures:
    """The figures a meter's counters add to: plain attributes, since every counted call adds
    to them (an add, not a method call). :class:`~workers.sandbox.metering.flops.FlopMeter` is one."""

    def __init__(self) -> None:
        self._forward = 0
        self._backward = 0
        self._untracked = 0
        self._no_grad = 0  # forward FLOPs of calls made with gradients off: no training update
        self._measurements = 0
        self._fallbacks: list[str] = []


# --- structure version: bumped when any module registers a parameter or submodule --------


class _Structure:
    version = 0
    installed = False


def _bump(*_: Any) -> None:
    _Structure.version += 1


def install_structure_hooks() -> None:
    """Have every module registration bump the structure version (once per process)."""
    if not _Structure.installed:  # global and permanent: a counter increment per registration
        nn.modules.module.register_module_parameter_registration_hook(_bump)
        nn.modules.module.register_module_module_registration_hook(_bump)
        _Structure.installed = True


# --- counts shared by the process ------------------------------------------------------------

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
    settings = tuple(
        sorted(
            (name, value)
            for name, value in vars(module).items()
            if not name.startswith("_")
            and name != "training"
            and (
                isinstance(value, _SCALAR_TYPES)
                or (isinstance(value, tuple) and all(isinstance(v, _SCALAR_TYPES) for v in value))
            )
        )
    )
    params = tuple((n, p.shape, p.dtype) for n, p in module._parameters.items() if p is not None)  # noqa: SLF001
    buffers = tuple((n, b.shape, b.dtype) for n, b in module._buffers.items() if b is not None)  # noqa: SLF001
    return (type(module), params, buffers, settings)


# --- hooks of tracked modules ------------------------------------------------------------


class _Inert:
    """What a meter's hooks become in copies and pickles of their module: nothing."""

    def __call__(self, *_: Any) -> None:
        return None


class Hook:
    """A meter's hook on a module: a copy or pickle of the module gets an inert one."""

    def __deepcopy__(self, memo: dict) -> _Inert:
        return _Inert()

    def __reduce__(self) -> tuple:
        return (_Inert, ())


class Enter(Hook):
    """Forward pre-hook: marks a tracked call as running (so nested tracked calls skip)."""

    def __init__(self, stack: list) -> None:
        self.stack = stack

    def __call__(self, module: nn.Module, args: tuple) -> None:
        self.stack.append(module)


class CallCounter(Hook):
    """Charges the calls of one module to one meter, measuring each new key once.

    As a tracked module's forward hook (always called) it charges the call when it is the
    outermost counted one; :meth:`charge` is what the watch calls for an untracked module.
    """

    def __init__(self, meter: MeterFigures, *, untracked: bool = False) -> None:
        self.meter = meter
        self.untracked = untracked
        self.stack = CALLS
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
        key = (
            grad,
            tuple([m.training for m in self.mods]),
            tuple([p.requires_grad for p in self.params]),
            self.structure,
            sig,
        )
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = self._lookup_or_measure(key, module, args, kwargs, grad)
        meter = self.meter
        meter._forward += entry[0]  # noqa: SLF001
        if not grad:
            meter._no_grad += entry[0]  # noqa: SLF001
        if self.untracked:
            meter._untracked += entry[0]  # noqa: SLF001
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
                meter._backward += _n  # noqa: SLF001
                meter._untracked += _n  # noqa: SLF001

            return charge_untracked

        def charge(_grad: Any, _n: int = backward) -> None:
            meter._backward += _n  # noqa: SLF001

        return charge

    def _measure(self, module: nn.Module, args: tuple, kwargs: dict, grad: bool) -> tuple:
        meter = self.meter
        self.stack.append(None)  # tracked modules reached by the dry run count as nested
        try:
            with _disable_current_modes(), torch.inference_mode(False):
                with torch.random.fork_rng(devices=cuda_indices(module, args)):
                    try:
                        forward, backward = dry_run(module, args, kwargs, grad, on_meta=True)
                    except Exception as meta_error:  # any op without a meta kernel lands here  # noqa: BLE001
                        try:
                            forward, backward = dry_run(module, args, kwargs, grad, on_meta=False)
                        except Exception as exc:
                            raise LearnerError(
                                f"Cannot measure the FLOPs of tracked module {type(module).__name__}: "
                                f"a copy fails on the meta device ({meta_error}) and on its own "
                                f"device ({exc}). Make the module deep-copyable, or stop tracking it "
                                "and report its FLOPs with ctx.report_flops."
                            ) from exc
                        meter._fallbacks.append(f"{type(module).__name__}: {meta_error}"[:300])  # noqa: SLF001
        finally:
            self.stack.pop()
        meter._measurements += 1  # noqa: SLF001
        return (forward, backward, self._charger(backward))


__all__ = [
    "CALLS",
    "OWNERS",
    "CallCounter",
    "Enter",
    "Hook",
    "MeterFigures",
    "forget_process_counts",
    "install_structure_hooks",
]
