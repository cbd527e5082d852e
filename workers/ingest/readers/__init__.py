"""Readers that turn a NEVIS'22 source's downloaded files into a Parquet image dataset.

Every module of this package is imported here, so a reader registers itself in
:data:`workers.ingest.readers.base.READERS` by its ``@reader("<key>")`` decorator alone: adding
a source is one new module, with no shared list to edit. See :mod:`.base` for the contract.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__: list[str] = []
