"""FLOPs of the probe fits (the linear and MLP target models), counted as the FLOP meter counts.

What counts: every matrix product of a fit, forward and backward, as
:class:`torch.utils.flop_counter.FlopCounterMode` counts it (one multiply-add = 2 FLOPs), the
convention of :class:`~workers.sandbox.metering.flops.FlopMeter`. As for a learner, element-wise ops,
reductions and the optimisers' own arithmetic (L-BFGS's two-loop recursion and line search
bookkeeping, Adam) are not counted, and neither is the linear probe's eigendecomposition
(``torch.linalg.eigh``, which the counter has no formula for).

Why not one ``FlopCounterMode`` around the whole fit: a dispatch mode costs about 50 us per
torch op, and a trial's fits are tens of thousands of small ops, so it would about double
their time. A full-batch fit repeats one step with the same shapes (an L-BFGS closure, an
Adam step), and a matrix product's FLOPs depend on shapes only, so :func:`repeated` counts
the first call of a step under the mode and charges every call that count, the way the
meter measures a module's first call per key. The one-off parts (fold statistics, the
preconditioner, the final scoring pass: a few hundred ops) run under the mode
(:func:`counted`).

Counting is on only inside :func:`counting`; elsewhere both helpers just run the code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from torch.utils.flop_counter import FlopCounterMode

T = TypeVar("T")


@dataclass
class FitFlops:
    """FLOPs of the fits run inside one :func:`counting` block."""

    flops: int = 0


_TALLY: ContextVar[FitFlops | None] = ContextVar("probe_fit_flops", default=None)


@contextmanager
def counting() -> Iterator[FitFlops]:
    """Count the FLOPs of every probe fit run inside; yields the tally."""
    tally = FitFlops()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


@contextmanager
def counted() -> Iterator[None]:
    """Count every op run inside (a fit's one-off parts; not around a repeated step)."""
    tally = _TALLY.get()
    if tally is None:
        yield
        return
    mode = FlopCounterMode(display=False)
    with mode:
        yield
    tally.flops += int(mode.get_total_flops())


def repeated(step: Callable[[], T]) -> Callable[[], T]:
    """``step``, charged on every call what its first call counted (its shapes never change)."""
    tally = _TALLY.get()
    if tally is None:
        return step
    cost: list[int] = []

    def run() -> T:
        if cost:
            tally.flops += cost[0]
            return step()
        mode = FlopCounterMode(display=False)
        with mode:
            out = step()
        cost.append(int(mode.get_total_flops()))
        tally.flops += cost[0]
        return out

    return run


__all__ = ["FitFlops", "counted", "counting", "repeated"]
