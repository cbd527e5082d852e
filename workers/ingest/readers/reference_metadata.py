"""The ``metadata`` file of a dataset prepared by the reference (dm_nevis), read without it.

The reference writes each prepared dataset's facts (class count, channels, a dict of extras
that holds the class names under one of several keys, the records per split) as a
``DatasetMetaData`` object pickled with dill and base64-encoded. Neither dill, the reference
nor TensorFlow Datasets is installed here, and a pickle may name any callable, so it is read
with an unpickler that builds only plain data (numbers, strings, lists, dicts, numpy scalars
and arrays) and stands an inert :class:`Opaque` record in for every other class it names:
nothing of the reference is imported or run, and the fields survive as a dict. Its calls are
bounded (:mod:`workers.ingest.readers.bounded_pickle`): ``frozenset(range(4e8))`` in a few
bytes of pickle is refused, not built, and a file over :data:`MAX_METADATA_BYTES` is not read.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.core.errors import DatasetFormatError
from workers.ingest.readers.bounded_pickle import BoundedUnpickler

METADATA_FILE = "metadata"
MAX_METADATA_BYTES = 16 * 2**20
"""The reference's metadata files are a few kB."""
# extras keys that hold class names in the reference's handlers: lists first, then
# name -> index maps (or index -> name); awa2's multi-label classes are its predicates.
_NAME_LISTS = ("class_names", "labels")
_NAME_MAPS = ("label_to_id", "label_str_to_id", "class_to_label", "predicates_to_id")

_SAFE = {
    ("builtins", name)
    for name in (
        "int",
        "float",
        "complex",
        "str",
        "bytes",
        "bytearray",
        "bool",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "slice",
        "range",
        "object",
    )
} | {
    ("collections", "defaultdict"),
    ("collections", "OrderedDict"),
    ("copyreg", "_reconstructor"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class Opaque:
    """Stands for an object of a class the pickle names but this service does not load (the
    reference's ``DatasetMetaData``, a TensorFlow Datasets feature, a dill helper). It keeps
    what the pickle gives it: constructor arguments and state."""

    qualified_name = "?"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.state = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __call__(self, *args: Any, **kwargs: Any) -> Opaque:  # a stand-in for a factory
        return Opaque(*args, **kwargs)

    def fields(self) -> dict[str, Any]:
        """The object's attributes, where its state was a dict (a dataclass's is)."""
        state = getattr(self, "state", None)
        if isinstance(state, tuple) and state and isinstance(state[0], dict):
            state = state[0]  # (dict, slots) form
        return dict(state) if isinstance(state, dict) else {}


class _DataOnlyUnpickler(BoundedUnpickler):
    _stand_ins: dict[tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        key = (module, name)
        if key not in self._stand_ins:
            self._stand_ins[key] = type(name, (Opaque,), {"qualified_name": f"{module}.{name}"})
        return self._stand_ins[key]


@dataclass(frozen=True)
class ReferenceMetadata:
    """What the import needs of a reference dataset's metadata."""

    num_classes: int
    num_channels: int | None
    class_names: tuple[str, ...] | None  # None: the metadata names no classes
    class_names_from: str  # the extras key they came from, or why there are none
    split_counts: Mapping[str, int] = field(default_factory=dict)  # records per split folder


def read_reference_metadata(folder: Path) -> ReferenceMetadata:
    """Read ``<folder>/metadata``.

    Raises:
        DatasetFormatError: the file is missing, not base64, not a pickle, or has no class count;
            the message names the file.
    """
    path = folder / METADATA_FILE
    if not path.is_file():
        raise DatasetFormatError(
            f"{path} is missing: the reference writes it when a dataset is "
            "complete, so this folder was not (fully) prepared."
        )
    if path.stat().st_size > MAX_METADATA_BYTES:
        raise DatasetFormatError(
            f"{path} has {path.stat().st_size} bytes, over the {MAX_METADATA_BYTES}-byte "
            "limit of a reference metadata file (they are a few kB): not read."
        )
    try:
        raw = base64.b64decode(path.read_bytes())
        loaded = _DataOnlyUnpickler(io.BytesIO(raw)).load()
    except Exception as exc:  # noqa: BLE001 - any failure of a damaged pickle means the same
        raise DatasetFormatError(
            f"{path} is not a reference metadata file (base64 of a pickle): {type(exc).__name__}: {exc}"
        ) from None
    fields = loaded.fields() if isinstance(loaded, Opaque) else loaded if isinstance(loaded, dict) else {}
    num_classes = fields.get("num_classes")
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise DatasetFormatError(
            f"{path} has no positive 'num_classes' (found {num_classes!r}): "
            "it is not the metadata of a reference dataset."
        )
    extras = fields.get("additional_metadata")
    extras = extras if isinstance(extras, Mapping) else {}
    names, where = class_names_of(extras, num_classes)
    channels = fields.get("num_channels")
    return ReferenceMetadata(
        num_classes=num_classes,
        num_channels=channels if isinstance(channels, int) else None,
        class_names=names,
        class_names_from=where,
        split_counts=_split_counts(extras),
    )


def class_names_of(extras: Mapping[str, Any], num_classes: int) -> tuple[tuple[str, ...] | None, str]:
    """The class names in the reference's extras, and the key they came from.

    Handlers keep them under different keys (a list, or a name -> index map); the first that
    names exactly ``num_classes`` classes, indices 0..K-1, wins. ``(None, reason)`` if none does.
    """
    for key in _NAME_LISTS:
        value = extras.get(key)
        if isinstance(value, (list, tuple)) and len(value) == num_classes and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value), key
    for key in _NAME_MAPS:
        value = extras.get(key)
        if not isinstance(value, Mapping) or len(value) != num_classes:
            continue
        try:
            pairs = (
                {int(i): str(n) for n, i in value.items()}
                if all(isinstance(n, str) for n in value)
                else {int(i): str(n) for i, n in value.items()}
            )
        except (TypeError, ValueError):
            continue
        if sorted(pairs) == list(range(num_classes)):
            return tuple(pairs[i].strip() for i in range(num_classes)), key
    return None, f"no class names for {num_classes} classes among {', '.join(_NAME_LISTS + _NAME_MAPS)}"


def _split_counts(extras: Mapping[str, Any]) -> dict[str, int]:
    counts = extras.get("num_data_points_per_split")
    if not isinstance(counts, Mapping):
        return {}
    out = {}
    for split, count in counts.items():
        try:
            out[str(split)] = int(count)
        except (TypeError, ValueError):
            continue
    return out


__all__ = [
    "MAX_METADATA_BYTES",
    "METADATA_FILE",
    "Opaque",
    "ReferenceMetadata",
    "class_names_of",
    "read_reference_metadata",
]
