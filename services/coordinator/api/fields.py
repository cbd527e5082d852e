"""Field types of the HTTP edge, declared once: every path, query and body field uses these.

- Integers are bounded to their database column: ids (``DbId``) and counts (``DbCount``)
  fit an INTEGER column, 32-bit on PostgreSQL, so ``/v1/learners/9223372036854775808`` or
  ``?offset=-1`` is a 422 naming the parameter before any query runs (not a 500 from the
  driver). Path and query values arrive as text and are parsed first; body fields are strict
  as well (``StrictDbId``: ``true`` is not ``1``, ``"7"`` is not ``7``).
- Strings are bounded (``NAME_MAX``, ...) and free text (``Label``) refuses control
  characters, which PostgreSQL cannot store (NUL) or which only serve to mislead.

Values (name syntax, image references, entry points, resource ranges) are checked by the
domain checks of :mod:`services.coordinator.common.validation`, which name the field the same way.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Le
from pydantic import AfterValidator, Strict, StringConstraints

from services.coordinator.common.validation import DB_INT_MAX

NAME_MAX = 100  # users.name, learners.name (String(100))
LABEL_MAX = 100  # api_tokens.label
ENTRYPOINT_MAX = 500
IMAGE_MAX = 500
STREAM_MAX = 100
VERSION_MAX = 100

DbId = Annotated[int, Ge(1), Le(DB_INT_MAX)]
"""A row id in a path or query: 1 .. 2**31 - 1."""
DbCount = Annotated[int, Ge(0), Le(DB_INT_MAX)]
"""An offset, a cursor or a count in a path or query: 0 .. 2**31 - 1."""
StrictDbId = Annotated[int, Strict(), Ge(1), Le(DB_INT_MAX)]
"""A row id (or any positive INTEGER) in a body: a JSON integer (not a boolean, not a
string), 1 .. 2**31 - 1."""
StrictDbCount = Annotated[int, Strict(), Ge(0), Le(DB_INT_MAX)]
"""A count or quota in a body: a JSON integer, 0 .. 2**31 - 1."""
StrictInt = Annotated[int, Strict()]
"""A JSON integer in a body whose range a domain check gives (GPUs, MiB of memory)."""
StrictFloat = Annotated[float, Strict()]
"""A JSON number (not a boolean, not a string); request bodies refuse NaN and infinities."""


def _printable(value: str) -> str:
    bad = next((c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)
    if bad is not None:
        raise ValueError(f"control character U+{ord(bad):04X} is not allowed")
    return value


Name = Annotated[str, StringConstraints(max_length=NAME_MAX)]
"""A user or learner name (its syntax is checked by ``check_name``)."""
Label = Annotated[str, StringConstraints(min_length=1, max_length=LABEL_MAX), AfterValidator(_printable)]
"""Free text a user picks (a token's label): 1-100 printable characters."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""A user or learner name, as a pattern for path and query parameters."""


__all__ = [
    "ENTRYPOINT_MAX",
    "IMAGE_MAX",
    "LABEL_MAX",
    "NAME_MAX",
    "NAME_PATTERN",
    "STREAM_MAX",
    "VERSION_MAX",
    "DbCount",
    "DbId",
    "Label",
    "Name",
    "StrictDbCount",
    "StrictDbId",
    "StrictFloat",
    "StrictInt",
]
