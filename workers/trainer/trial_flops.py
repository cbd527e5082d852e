"""A trial's FLOP fields as harness code charges them: the running totals a host reports, the
final frame's, and the most of them (a final frame cannot take back what its host reported
before), with the part of them spent on training updates.

Kept apart from :mod:`workers.trainer.trial` because the task's preparation, a multi-worker
trial's ranks and the trial loop charge the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.errors import LearnerError
from workers.sandbox import messages
from workers.sandbox.wire import WireError

FLOP_KEYS = ("flops_measured", "flops_reported", "flops_untracked")


def no_flops() -> dict[str, int | str]:
    """The FLOP fields of a trial that spent none (or whose count died with its process)."""
    return {"flops_measured": 0, "flops_reported": 0, "flops_untracked": 0, "flops_source": "measured"}


def reported_flops(counts: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """A host's running FLOP totals (its ``flops`` message, checked), kept only if they never go down."""
    if any(counts[k] < int(before.get(k, 0)) for k in FLOP_KEYS):
        raise LearnerError("the learner host's running FLOP totals went down")
    return most_flops(counts)


def final_flops(header: Mapping[str, Any]) -> dict[str, Any]:
    """The final frame's FLOP fields if they are valid counts, else none (the interim
    reports are charged then)."""
    try:
        return messages.flop_fields(header)
    except WireError:
        return no_flops()


def update_flops(result: Mapping[str, Any], charged: Mapping[str, Any]) -> int:
    """The training-update part of what is charged: the final frame's ``flops_updates`` plus
    whatever is charged beyond the final frame's own totals (interim reports it took back);
    all of it when the host did not split its count."""
    total = int(charged["flops_measured"]) + int(charged["flops_reported"])
    updates = result.get("flops_updates")
    if updates is None:
        return total
    final = int(result.get("flops_measured", 0)) + int(result.get("flops_reported", 0))
    return min(total, int(updates) + max(total - final, 0))


def most_flops(*reports: Mapping[str, Any]) -> dict[str, Any]:
    """Per FLOP field, the most any report said: a final frame cannot take back what the host
    reported before (the fields only grow, and untracked stays within measured)."""
    counts = {k: max(int(r.get(k, 0)) for r in reports) for k in FLOP_KEYS}
    return {**counts, "flops_source": "reported" if counts["flops_reported"] else "measured"}


__all__ = ["FLOP_KEYS", "final_flops", "most_flops", "no_flops", "reported_flops", "update_flops"]
