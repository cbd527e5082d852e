"""Errors of the coordinator: what a client did wrong, each naming the field at fault.

The HTTP layer maps each class to one status code in one place
(:mod:`services.coordinator.api.problems`); nothing else raises HTTP errors.
"""

from __future__ import annotations

from collections.abc import Callable

from services.core.errors import NevisError


class CoordinatorError(NevisError):
    """A request the coordinator refuses; ``field`` names the offending input, if one does."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)


class InvalidInputError(CoordinatorError, ValueError):
    """A value is malformed or out of range."""


class AuthenticationError(CoordinatorError):
    """No token, or a token that is unknown, expired or revoked."""


class PermissionDeniedError(CoordinatorError):
    """The caller's role does not allow this."""


class NotFoundError(CoordinatorError, KeyError):
    """No such resource, or not one the caller may see."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConflictError(CoordinatorError):
    """The request clashes with the current state (a taken name, a reused key, ...)."""


class QuotaExceededError(CoordinatorError):
    """A per-user quota is used up; ``retry_after_s`` says when to try again, if known."""

    def __init__(self, message: str, *, field: str | None = None, retry_after_s: int | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Callable[..., QuotaExceededError], tuple[str, str | None, int | None]]:
        return (_rebuild_quota, (str(self), self.field, self.retry_after_s))


def _rebuild_quota(message: str, field: str | None, retry: int | None) -> QuotaExceededError:
    return QuotaExceededError(message, field=field, retry_after_s=retry)


class PayloadTooLargeError(CoordinatorError):
    """An upload is larger than the configured limit."""


__all__ = [
    "AuthenticationError",
    "ConflictError",
    "CoordinatorError",
    "InvalidInputError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QuotaExceededError",
]
