"""The project's exceptions: one base class, one subclass per kind of failure.

Every message says what went wrong and, where it helps, which setting or command fixes it.
The CLI turns any :class:`NevisError` into a one-line message and a non-zero exit code; the
HTTP layer turns it into a problem-details response. Anything else is a bug.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any


class NevisError(Exception):
    """Base class of every error this project raises on purpose.

    ``field`` names the input at fault, when one is (a budget key, a request field), as
    data: the HTTP layer reports it without parsing the message.
    """

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self.field = field

    def __reduce__(self) -> tuple[Callable[..., NevisError], tuple[Any, ...], dict[str, Any] | None]:
        # keeps subclasses (their field, and attributes such as a failed call's usage) across Ray
        state = {k: v for k, v in self.__dict__.items() if k != "field"}
        return (_rebuild, (self.__class__, self.args, self.field), state or None)


def _rebuild(cls: type[NevisError], args: tuple[object, ...], field: str | None) -> NevisError:
    error = cls(*args)
    error.field = field
    return error


class ConfigError(NevisError):
    """A setting is missing, malformed or unsafe."""


class ManifestError(NevisError):
    """A stream manifest is malformed."""


class UnknownNameError(NevisError, KeyError):
    """A stream, dataset, learner or metric name is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DatasetNotFoundError(NevisError):
    """A dataset a stream needs cannot be found; the message says how to provide it."""


class DatasetFormatError(NevisError, ValueError):
    """A dataset's files exist but do not hold what their format promises."""


class InvalidKeyError(NevisError, ValueError):
    """An object-store key is not a safe relative path."""


class ObjectNotFoundError(NevisError, KeyError):
    """An object-store key has no object."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ObjectTooLargeError(NevisError):
    """An object is larger than its reader allows: refused before its bytes are read."""


class DataIntegrityError(NevisError):
    """Stored bytes do not match their recorded checksum, or a file cannot be read (named apart
    from SQLAlchemy's ``IntegrityError``, a database constraint, which callers catch too)."""


class DatabaseError(NevisError):
    """The database is unreachable or its schema is not at the expected revision."""


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """Build an "unknown X, did you mean Y" message listing what is available."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"Unknown {kind} {name!r}.{hint} Known: {', '.join(known) or '(none)'}."


class CausalityError(NevisError):
    """A learner asked for something the protocol forbids: a future task or a test split."""


class LearnerError(NevisError):
    """A learner broke its contract (malformed predictions, bad search space, ...)."""


class TaskFailedError(NevisError):
    """Every trial of a task failed; nothing was committed for it."""


class BundleError(NevisError, ValueError):
    """A learner bundle (an uploaded archive) is unreadable, unsafe or too large."""


class BudgetError(NevisError, ValueError):
    """A run budget (trials, steps, FLOP or wall caps) makes no sense."""


class ProbeInputError(NevisError):
    """A probe job's input is unusable: a missing or corrupted checkpoint, a learner that
    cannot load it, or features that are not a finite (N, d) array. Permanent: the probe pool
    fails the job at once with this message instead of retrying it."""


__all__ = [
    "BudgetError",
    "BundleError",
    "CausalityError",
    "ConfigError",
    "DataIntegrityError",
    "DatabaseError",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "InvalidKeyError",
    "LearnerError",
    "ManifestError",
    "NevisError",
    "ObjectNotFoundError",
    "ObjectTooLargeError",
    "ProbeInputError",
    "TaskFailedError",
    "UnknownNameError",
    "unknown_name_message",
]
