"""An unpickler whose constructor calls cannot ask for more memory than their pickle carries.

Why: a pickle is a program. Even one allowed to name only plain builtins can write
``frozenset(range(400_000_000))`` in a few bytes and make its reader build tens of GiB
(issue 44). Every call a pickle makes (``REDUCE``, ``NEWOBJ``, ``NEWOBJ_EX``, ``INST``, ``OBJ``)
goes through :meth:`BoundedUnpickler.checked_call`, which refuses, before calling, any argument
with more than :data:`MAX_ITEMS` items, a size argument of ``bytes``/``bytearray`` over
:data:`MAX_ITEMS` and a NumPy array shape of more than :data:`MAX_ITEMS` elements. It is the
pure-Python unpickler (the C one cannot be hooked per opcode): slower, and meant for small
files such as a dataset's metadata.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Sized
from typing import Any

MAX_ITEMS = 10**7
"""The most items (or bytes, or array elements) one call of a pickle may ask for."""


class BoundedUnpickler(pickle._Unpickler):  # noqa: SLF001 - the Python unpickler is the one with opcode hooks
    """A pickle reader whose calls are held to :data:`MAX_ITEMS` (subclasses choose what
    ``find_class`` may return, as with :class:`pickle.Unpickler`)."""

    dispatch = dict(pickle._Unpickler.dispatch)  # noqa: SLF001

    def checked_call(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None = None,
        *,
        new: bool = False,
    ) -> Any:
        """``func(*args, **kwargs)`` (``func.__new__(func, ...)`` with ``new``), after its arguments pass."""
        for value in (*args, *(kwargs or {}).values()):
            _check_size(value)
        _check_call(func, args)
        if new:
            return func.__new__(func, *args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self.checked_call(self.stack[-1], tuple(args))

    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self.checked_call(cls, tuple(args), new=True))

    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self.checked_call(cls, tuple(args), dict(kwargs), new=True))

    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def _instantiate(self, klass: Any, args: Any) -> None:
        if args or not isinstance(klass, type) or hasattr(klass, "__getinitargs__"):
            self.append(self.checked_call(klass, tuple(args)))
        else:
            self.append(klass.__new__(klass))


def _check_size(value: Any) -> None:
    if isinstance(value, Sized) and not isinstance(value, type):
        try:
            size = len(value)
        except (OverflowError, TypeError):
            raise pickle.UnpicklingError("the pickle asks for a collection too large to count") from None
        if size > MAX_ITEMS:
            raise pickle.UnpicklingError(
                f"the pickle asks for a collection of {size} items; at most {MAX_ITEMS} are read"
            )


def _check_call(func: Any, args: tuple[Any, ...]) -> None:
    if func in (bytes, bytearray) and args and isinstance(args[0], int) and args[0] > MAX_ITEMS:
        raise pickle.UnpicklingError(f"the pickle asks for {args[0]} bytes; at most {MAX_ITEMS} are read")
    name = getattr(func, "__name__", "")
    module = getattr(func, "__module__", "") or ""
    if module.startswith("numpy") or name == "ndarray":
        shape = args[1] if name == "_reconstruct" and len(args) > 1 else args[0] if args else ()
        _check_shape(shape)


def _check_shape(shape: Any) -> None:
    extents = shape if isinstance(shape, tuple) else (shape,) if isinstance(shape, int) else ()
    if all(isinstance(e, int) for e in extents) and math.prod(abs(e) for e in extents) > MAX_ITEMS:
        raise pickle.UnpicklingError(
            f"the pickle asks for an array of shape {extents}; at most {MAX_ITEMS} elements are read"
        )


__all__ = ["MAX_ITEMS", "BoundedUnpickler"]
