"""How a learner host's message is declared and read: its fields, their checks, and the bounds a
request sets.

The vocabulary :mod:`workers.sandbox.messages` declares each message in; kept apart so that the
declarations read as a table. Every check returns the value as harness code keeps it, or raises
ValueError saying why not, which :meth:`Message.read` turns into a
:class:`~workers.sandbox.wire.WireError` naming the message and the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workers.sandbox.wire import Part, WireError

MAX_SECONDS = 1e9


@dataclass(frozen=True)
class Limits:
    """Bounds a message takes from the request it belongs to (a trial's; none otherwise)."""

    steps: int = 0
    checkpoint_at: tuple[int, ...] = ()
    rungs: tuple[int, ...] = ()


Check = Callable[[Any, Limits], Any]
"""A field's check: returns the value as harness code keeps it, raises ValueError saying why not."""


@dataclass(frozen=True)
class Field:
    """One header field: its check, and what it is when a host leaves it out (if it may)."""

    check: Check
    required: bool = True
    default: Any = None


@dataclass(frozen=True)
class Message:
    """One message: its fields, the kinds of its parts in order (``a`` numeric array, ``b``
    bytes), and rules across fields (each returns a problem, or None)."""

    name: str
    fields: Mapping[str, Field] = field(default_factory=dict)
    parts: tuple[str, ...] = ()
    rules: tuple[Callable[[dict[str, Any]], str | None], ...] = ()

    def read(self, header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()) -> dict[str, Any]:
        """The declared fields of ``header``, checked; raises WireError naming what is wrong."""
        kinds = tuple("a" if isinstance(p, np.ndarray) else "b" for p in parts)
        if kinds != self.parts:
            raise WireError(f"{self.name}: expects parts {list(self.parts)}; got {list(kinds)[:20]}")
        out = read_fields(self.name, self.fields, header, limits)
        for rule in self.rules:
            problem = rule(out)
            if problem:
                raise WireError(f"{self.name}: {problem}")
        return out


def read_fields(
    name: str, fields: Mapping[str, Field], header: Mapping[str, Any], limits: Limits = Limits()
) -> dict[str, Any]:
    """``fields`` of ``header``, each checked (the parts of a message left aside)."""
    out = {}
    for key, spec in fields.items():
        if key not in header:
            if spec.required:
                raise WireError(f"{name}: field {key!r} is missing")
            out[key] = spec.default
            continue
        try:
            out[key] = spec.check(header[key], limits)
        except (ValueError, TypeError, OverflowError) as exc:
            raise WireError(f"{name}: field {key!r} {exc}") from None
    return out


# --- checks ------------------------------------------------------------------------------


def integer(low: int, high: int | Callable[[Limits], int]) -> Check:
    """An int (not a bool) in [low, high]; ``high`` may come from the limits."""

    def check(value: Any, limits: Limits) -> int:
        top = high(limits) if callable(high) else high
        if not _is_int(value) or not low <= value <= top:
            raise ValueError(f"must be an int in [{low}, {top}]; got {shown(value)}")
        return value

    return check


def member(of: Callable[[Limits], Collection[int]], what: str) -> Check:
    """An int among the steps the request declared (its checkpoints, its rungs)."""

    def check(value: Any, limits: Limits) -> int:
        allowed = of(limits)
        if not _is_int(value) or value not in allowed:
            raise ValueError(f"must be one of the {what} {sorted(allowed)[:20]}; got {shown(value)}")
        return value

    return check


def seconds(value: Any, limits: Limits) -> float:
    """A duration: a finite number of seconds, not negative."""
    if not _is_number(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"must be a finite number of seconds in [0, {MAX_SECONDS:g}]; got {shown(value)}")
    return float(value)


def text(limit: int) -> Check:
    """A string, cut to ``limit`` characters (a long message is not a broken one)."""

    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string; got {type(value).__name__}")  # noqa: TRY004
        return value[:limit]

    return check


def label(limit: int) -> Check:
    """A non-empty string of at most ``limit`` characters, refused rather than cut (a name cut
    would be another name)."""

    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= limit:
            raise ValueError(f"must be a non-empty string of at most {limit} characters; got {shown(value)}")
        return value

    return check


def one_of(*values: str) -> Check:
    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str) or value not in values:
            raise ValueError(f"must be one of {list(values)}; got {shown(value)}")
        return value

    return check


def list_of(item: Check, longest: Callable[[Limits], int]) -> Check:
    """A list of at most ``longest(limits)`` items, each checked."""

    def check(value: Any, limits: Limits) -> list[Any]:
        most = longest(limits)
        if not isinstance(value, list) or len(value) > most:
            size = len(value) if isinstance(value, list) else type(value).__name__
            raise ValueError(f"must be a list of at most {most} items; got {size}")
        checked = []
        for i, entry in enumerate(value):
            try:
                checked.append(item(entry, limits))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"item {i}: {exc}") from None
        return checked

    return check


def optional(inner: Check) -> Check:
    """``inner``, or None."""
    return lambda value, limits: None if value is None else inner(value, limits)


def flag(value: Any, limits: Limits) -> bool:
    """A JSON boolean (not a number standing for one)."""
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false; got {shown(value)}")  # noqa: TRY004
    return value


def mapping(value: Any, limits: Limits) -> dict[str, Any]:
    """A JSON object, read in depth by its owner (a declaration's search space, resources)."""
    if not isinstance(value, dict):
        raise ValueError(f"must be an object; got {type(value).__name__}")  # noqa: TRY004
    return value


STEP = integer(0, lambda lim: lim.steps)


def curve_point(value: Any, limits: Limits) -> list[Any]:
    """``[step, loss]`` of the learner's curve: the step within the trial, the loss finite,
    ``"inf"`` (the host's spelling of a diverged run, JSON having no infinity) or null."""
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"must be [step, loss]; got {shown(value)}")
    step, loss = value
    STEP(step, limits)
    if not (loss is None or loss == "inf" or (_is_number(loss) and math.isfinite(loss))):
        raise ValueError(f'loss must be a finite number, "inf" or null; got {shown(loss)}')
    return [step, loss if loss is None or loss == "inf" else float(loss)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def shown(value: Any) -> str:
    return repr(value)[:40]


CHECKPOINT_STEP = member(lambda lim: lim.checkpoint_at, "checkpoint steps")
RUNG_STEP = member(lambda lim: lim.rungs, "rung steps")
CURVE = list_of(curve_point, lambda lim: lim.steps + 1)


__all__ = [
    "CHECKPOINT_STEP",
    "CURVE",
    "RUNG_STEP",
    "MAX_SECONDS",
    "STEP",
    "Check",
    "Field",
    "Limits",
    "Message",
    "curve_point",
    "flag",
    "integer",
    "label",
    "list_of",
    "mapping",
    "member",
    "one_of",
    "optional",
    "read_fields",
    "seconds",
    "shown",
    "text",
]
