"""The FLOP meter's watch: the outermost calls of torch modules that no meter tracks.

Kept apart from :mod:`workers.sandbox.metering.flop_counter` because it is process-wide machinery of its
own (see :mod:`workers.sandbox.metering.flops` for the contract): a global forward pre-hook installed
only *between* outermost calls, one-off hooks on the called module, and a fork handler. Each
untracked call is charged by a :class:`~workers.sandbox.metering.flop_counter.CallCounter`, as a
tracked module's call is, to the newest watching meter's :class:`UntrackedCalls`.

Hook dicts are torch's own (``Module._forward_hooks`` ...): the watch adds and removes its
entries directly, under ids reserved from torch's handle counter, because it does so twice
per outermost call and a handle object per call would cost more than the rest together.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections import OrderedDict
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from workers.sandbox.metering.flop_counter import (
    CALLS,
    OWNERS,
    CallCounter,
    Hook,
    MeterFigures,
    install_structure_hooks,
)

_GLOBAL_PRE_HOOKS = nn.modules.module._global_forward_pre_hooks  # noqa: SLF001


def _reserved_hook_id() -> int:
    """A hook id torch will never hand out again (its handle counter moves past it)."""
    return RemovableHandle(OrderedDict()).id


_OUTER_ID, _DEPTH_ID, _EXIT_ID = _reserved_hook_id(), _reserved_hook_id(), _reserved_hook_id()
_TRACKED = object()  # the running outermost call is of a tracked module: its own hooks count it
_NEW = object()  # an untracked module this meter has not seen yet
_OPAQUE = object()  # an untracked module that cannot be measured: looked through


class UntrackedCalls:
    """One meter's part in the watch: the counters of the untracked modules it was charged for,
    and those that could not be measured."""

    def __init__(self, meter: MeterFigures) -> None:
        self.meter = meter
        self.counters: dict[int, tuple[weakref.ref, Any]] = {}
        self.unmeasured: list[str] = []

    def start(self) -> None:
        """Be charged for untracked calls from now on (the newest started is charged)."""
        install_structure_hooks()
        if self in _Watch.watchers:
            _Watch.watchers.remove(self)
        else:
            _abandon_call()  # a call a BaseException cut short before: start clean
        _Watch.watchers.append(self)
        _resume()

    def stop(self) -> None:
        """Stop being charged; the one started before resumes (or the watch ends)."""
        if self not in _Watch.watchers:
            return
        _Watch.watchers.remove(self)
        if not _Watch.watchers:
            _abandon_call()
            _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)

    @property
    def charged(self) -> bool:
        """Whether untracked calls are charged here now."""
        return bool(_Watch.watchers) and _Watch.watchers[-1] is self

    def charge(self, module: nn.Module, counter: Any, args: tuple, kwargs: dict, output: Any) -> None:
        """Charge one untracked outermost call (the watch's exit hook calls this)."""
        key = id(module)
        counters = self.counters
        if counter is _NEW:
            counter = CallCounter(self.meter, untracked=True)
            ref = weakref.ref(module, lambda _ref, _key=key: counters.pop(_key, None))
            counters[key] = (ref, counter)
        try:
            counter.charge(module, args, kwargs, output)
        except Exception as exc:  # noqa: BLE001 - no copy of it runs: look through it from now on
            counters[key] = (counters[key][0], _OPAQUE)
            self.unmeasured.append(f"{type(module).__name__}: {exc}"[:300])


class _Watch:
    """Process-wide state of the watch (learner code runs in one thread of one process)."""

    watchers: list[UntrackedCalls] = []  # of the watching meters; the newest one is charged
    call: list[Any] | None = None  # [module, watcher, counter, depth] of the running outermost call


def _outer_enter(module: nn.Module, args: tuple) -> None:
    """Global forward pre-hook, installed only between outermost calls: claims this call."""
    if CALLS or _Watch.call is not None or not _Watch.watchers:
        return None  # inside a call that counts (begun before watching) or a dry run
    watcher = _Watch.watchers[-1]
    key = id(module)
    owner = OWNERS.get(key)
    counter: Any
    if owner is not None and owner[0]() is module:
        counter = _TRACKED
    else:
        entry = watcher.counters.get(key)
        counter = _NEW if entry is None or entry[0]() is not module else entry[1]
        if counter is _OPAQUE:
            return None  # not measurable as a whole: the calls inside it are the outermost ones
        CALLS.append(module)  # tracked modules called inside this call are part of it
    _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)  # calls inside this one take torch's hook-free path
    _Watch.call = [module, watcher, counter, 0]
    try:
        module._forward_pre_hooks[_DEPTH_ID] = _OUTER_DEPTH  # noqa: SLF001
        module._forward_hooks[_EXIT_ID] = _OUTER_EXIT  # noqa: SLF001
        module._forward_hooks_with_kwargs[_EXIT_ID] = True  # noqa: SLF001
        module._forward_hooks_always_called[_EXIT_ID] = True  # noqa: SLF001
    except Exception:  # noqa: BLE001 - a module without torch's hook dicts: not counted
        _abandon_call()
        _resume()
    return None


class _OuterDepth(Hook):
    """Pre-hook on the module of the running outermost call: counts calls of it inside it."""

    def __call__(self, module: nn.Module, args: tuple) -> None:
        call = _Watch.call
        if call is not None and call[0] is module:
            call[3] += 1


class _OuterExit(Hook):
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
        watcher, counter = call[1], call[2]
        try:
            CALLS.clear()  # this was the outermost call: whatever is left is an interrupted one's
            if counter is not _TRACKED and not (output is None and sys.exc_info()[1] is not None):
                watcher.charge(module, counter, args, kwargs, output)
        finally:
            _resume()
        return None


_OUTER_DEPTH, _OUTER_EXIT = _OuterDepth(), _OuterExit()


def _detach(module: nn.Module) -> None:
    module._forward_pre_hooks.pop(_DEPTH_ID, None)  # noqa: SLF001
    module._forward_hooks.pop(_EXIT_ID, None)  # noqa: SLF001
    module._forward_hooks_with_kwargs.pop(_EXIT_ID, None)  # noqa: SLF001
    module._forward_hooks_always_called.pop(_EXIT_ID, None)  # noqa: SLF001


def _resume() -> None:
    """Put the global pre-hook back if a meter watches and no outermost call is running."""
    if _Watch.watchers and _Watch.call is None:
        _GLOBAL_PRE_HOOKS[_OUTER_ID] = _outer_enter


def _abandon_call() -> None:
    """Forget a running outermost call (one a BaseException cut short, or the watch's end)."""
    call, _Watch.call = _Watch.call, None
    if call is not None:
        _detach(call[0])
    CALLS.clear()


def _stop_in_forked_child() -> None:
    """A forked child (a DataLoader worker) cannot charge the parent's meter: it stops."""
    _Watch.watchers.clear()
    _Watch.call = None
    _GLOBAL_PRE_HOOKS.pop(_OUTER_ID, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_stop_in_forked_child)


__all__ = ["UntrackedCalls"]
