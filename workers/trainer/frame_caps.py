"""What each frame a learner host sends during a trial may weigh, checked before it is read.

Why: the wire's own limits (:mod:`workers.sandbox.wire`) are generous, 4 GiB a part, so
that one host can hand back a large predictor; without a per-message cap a hostile learner
could make harness code read, hold and compute on gigabytes it never needed (a forged
4096 × 4096 proxy rung report cost ~47 s and 1.2 GiB of uncharged harness time). Each
message whose parts the trial expects gets its own ceiling from the task and the host's
limits (:class:`~workers.sandbox.limits.HostLimits`); the frame's announced sizes are held
to it by :func:`workers.sandbox.wire.receive` before a byte of its parts is read, and a frame
over it fails the trial (its host is closed: it is mid-frame).

Arrays are bounded by their element count × 8 bytes (float64, the widest an honest host
sends) plus the ``.npy`` header: dev scores N × K, proxy features n·q × d with d at most
``HostLimits.proxy_max_dim``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workers.sandbox.limits import HostLimits
from workers.sandbox.ops import HostOp, Reply, op_of
from workers.sandbox.wire import WireError

ITEM_BYTES = 8
"""Widest element an array part may carry (float64, int64)."""

NPY_HEADER_BYTES = 4096
"""Room for an array part's ``.npy`` header (NumPy writes 128 bytes for a 2-D float array)."""


@dataclass(frozen=True)
class TrialFrameCaps:
    """The byte ceilings of the parts of one trial's frames: by request ``op``, and for the
    ``ok`` result (dev scores, predictor, state)."""

    rung_bytes: int
    checkpoint_bytes: int
    result_bytes: tuple[int, int, int]

    def __call__(self, header: dict[str, Any], sizes: Sequence[tuple[str, int]]) -> None:
        """Refuse (WireError) a frame whose announced parts are over its message's caps."""
        op = op_of(header)
        if op == HostOp.RUNG:
            _hold("rung report", sizes, (self.rung_bytes,))
        elif op == HostOp.CHECKPOINT:
            _hold("checkpoint", sizes, (self.checkpoint_bytes,))
        elif op == Reply.RESULT and header.get("status") == "ok":
            _hold("result of trial (ok)", sizes, self.result_bytes)


def array_bytes(*shape: int) -> int:
    """The most an honest array part of ``shape`` takes on the wire."""
    count = 1
    for extent in shape:
        count *= max(int(extent), 0)
    return count * ITEM_BYTES + NPY_HEADER_BYTES


def trial_frame_caps(
    *,
    num_dev: int,
    num_classes: int,
    limits: HostLimits,
    proxy: dict[str, int] | None = None,
    checkpoint_bytes: int | None = None,
) -> TrialFrameCaps:
    """The caps of a trial on a task of ``num_dev`` dev images and ``num_classes`` classes;
    under the proxy scheduler (``proxy``: its ``n`` and ``q``) a rung carries n·q × d
    features with d ≤ ``limits.proxy_max_dim``, else dev scores."""
    scores = array_bytes(num_dev, num_classes)
    rung = array_bytes(int(proxy["n"]) * int(proxy["q"]), limits.proxy_max_dim) if proxy else scores
    predictor = limits.predictor_bytes if checkpoint_bytes is None else min(limits.predictor_bytes, checkpoint_bytes)
    return TrialFrameCaps(
        rung_bytes=rung, checkpoint_bytes=predictor, result_bytes=(scores, limits.predictor_bytes, limits.state_bytes)
    )


def _hold(what: str, sizes: Sequence[tuple[str, int]], caps: Sequence[int]) -> None:
    """Each announced part within its cap (a frame with other parts is the messages' to refuse)."""
    for index, ((_, size), cap) in enumerate(zip(sizes, caps)):
        if size > cap:
            raise WireError(
                f"{what}: part {index} announces {size} bytes, over the {cap}-byte limit; it was refused unread"
            )


__all__ = ["ITEM_BYTES", "NPY_HEADER_BYTES", "TrialFrameCaps", "array_bytes", "trial_frame_caps"]
