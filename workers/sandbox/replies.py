"""A learner host's replies as harness code takes them: read through their declarations, or
turned into the error they stand for.

Every frame that ends a request (a ``result``, an ``error``, ``ready``) is hostile input: it
is read through :mod:`workers.sandbox.messages` here, for :class:`~workers.sandbox.client.LearnerHost`,
which kills a host whose reply breaks its declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.errors import CausalityError, LearnerError, UnknownNameError
from workers.sandbox import messages
from workers.sandbox.messages import Limits
from workers.sandbox.ops import Op
from workers.sandbox.wire import Part, WireError


class BrokenReply(WireError):
    """A reply that breaks its declaration (its host is killed: the real reply may follow);
    ``header`` is what it sent, whose FLOP fields may still be valid counts to charge."""

    def __init__(self, message: str, header: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.header = dict(header)

    def __reduce__(self) -> tuple[Any, ...]:  # may cross Ray as an error's cause
        return type(self), (str(self), self.header)


def read_checked(
    what: Op | messages.Message, header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()
) -> dict[str, Any]:
    """The declared fields of the result of request ``what`` (or of message ``what``), checked;
    raises :class:`BrokenReply` naming what is wrong."""
    try:
        if isinstance(what, messages.Message):
            return what.read(header, parts, limits)
        return messages.read_reply(what, header, parts, limits)
    except WireError as exc:
        raise BrokenReply(str(exc), header) from None


def error_of(reply: Mapping[str, Any], what: str) -> Exception:
    """The exception a host's checked ``error`` frame stands for, its kind kept where harness
    code acts on it (an unknown learner name, a causality breach)."""
    kind, message = str(reply["error"]), str(reply["message"])
    text = f"{what}: {kind}: {message}"
    if kind == "UnknownNameError":
        return UnknownNameError(message)
    if kind == "CausalityError":
        return CausalityError(text)
    return LearnerError(text)


__all__ = ["BrokenReply", "error_of", "read_checked"]
