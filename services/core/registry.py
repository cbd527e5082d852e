"""A name → factory table, so that adding a kind of thing is one module plus one entry.

Search strategies and execution backends are picked by name (a request field, an
``NEVIS_*`` variable). One :class:`Registry` per kind keeps the names in one place, so the
lookup, the list of what exists and the "did you mean" message on a typo never drift apart.
Entries may be :func:`lazy`, so listing or validating names imports nothing heavy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from services.core.errors import UnknownNameError, unknown_name_message

T = TypeVar("T")


class Registry(Generic[T]):
    """Names of one ``kind`` (e.g. "backend") mapped to their factories, one entry each."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, factory: T) -> T:
        """Add ``name``; returns ``factory``. A second entry under one name is a bug, so
        it raises ``ValueError`` rather than silently replacing the first."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ValueError(f"A {self.kind} name must be a non-empty string without surrounding spaces; got {name!r}.")
        if name in self._entries:
            raise ValueError(f"The {self.kind} {name!r} is already registered.")
        self._entries[name] = factory
        return factory

    def get(self, name: str) -> T:
        """The factory of ``name``.

        Raises:
            UnknownNameError: ``name`` is not registered; the message lists the known
                names and the closest ones.
        """
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(unknown_name_message(self.kind, str(name), self._entries)) from None

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={list(self.names())})"


def lazy(target: str) -> Callable[..., Any]:
    """A factory that imports ``"package.module:attribute"`` on its first call and calls it.

    Registering ``lazy(...)`` keeps the registry's own import cheap: a backend's module (and
    what it imports, e.g. Ray or Kubernetes code) loads only when that backend is built.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"A lazy target is 'package.module:attribute'; got {target!r}.")
    resolved: list[Callable[..., Any]] = []

    def factory(*args: Any, **kwargs: Any) -> Any:
        if not resolved:
            resolved.append(getattr(importlib.import_module(module_name), attribute))
        return resolved[0](*args, **kwargs)

    factory.__qualname__ = factory.__name__ = f"lazy({target})"
    factory.target = target  # type: ignore[attr-defined] - for introspection and tests
    return factory


__all__ = ["Registry", "lazy"]
