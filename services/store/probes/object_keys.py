"""Where the probe pool's objects live in the object store.

Declared here, beside the queue, rather than in :mod:`workers.probe`: the pool writes these
objects and the store's garbage collection (:mod:`services.store.garbage`) must know which
rows keep them, and the store layer cannot import the pool.
"""

from __future__ import annotations

FEATURES_PREFIX = "probe-features"


def features_key(settings_hash: str, checkpoint_id: int) -> str:
    """Where a checkpoint's probe features live: written by its checkpoint job, read by its
    trial job."""
    return f"{FEATURES_PREFIX}/{settings_hash}/{checkpoint_id}.npz"


__all__ = ["FEATURES_PREFIX", "features_key"]
