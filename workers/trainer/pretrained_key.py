"""Where a run's pretrained checkpoint lives in the object store, given what its request named."""

from __future__ import annotations

import hashlib
from pathlib import Path

from services.core.errors import NevisError
from services.store.key_layout import pretrained_key
from services.store.objects import ObjectStore


def stored_pretrained(store: ObjectStore, source: str) -> str:
    """The object-store key of a pretrained checkpoint: a file is uploaded under its digest
    (so the same file is stored once); anything else must be an existing key."""
    path = Path(source).expanduser()
    if path.is_file():
        data = path.read_bytes()
        return store.put_bytes(pretrained_key(hashlib.sha256(data).hexdigest()), data).key
    try:
        present = store.exists(source)
    except NevisError:  # not even a valid key (an absolute path that is not a file)
        present = False
    if present:
        return source
    raise NevisError(
        f"Pretrained checkpoint {source!r} is neither a file nor a key of the object store "
        "(make one with `nevis pretrain`)."
    )


__all__ = ["stored_pretrained"]
