"""Errors of the probe pool. A :class:`ProbeInputError` is permanent: retrying cannot help.

The pool fails such a job at once with the message (which names the checkpoint, what is
wrong and what to do); any other exception is treated as transient and retried until the
job's attempts run out.
"""

from __future__ import annotations

from services.core.errors import NevisError


class ProbeInputError(NevisError):
    """A probe job's input is unusable: a missing or corrupted checkpoint, a learner that
    cannot load it, or features that are not a finite (N, d) array."""


__all__ = ["ProbeInputError"]
