"""Where the probe pool's objects live in the object store.

Declared in the store's one key layout (:mod:`services.store.key_layout`), not in
:mod:`workers.probe`: the pool writes these objects and the store's garbage collection must
know which rows keep them, and the store layer cannot import the pool. Re-exported here for
the pool.
"""

from __future__ import annotations

from services.store.key_layout import PROBE_FEATURES as FEATURES_PREFIX
from services.store.key_layout import features_key

__all__ = ["FEATURES_PREFIX", "features_key"]
