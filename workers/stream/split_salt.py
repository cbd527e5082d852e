"""A deployment's secret split salt: seeded draws no submitter can repeat.

NEVIS'22's splits are seeded functions of public data, so anyone can prepare a stream and
read every test split with its labels (docs/isolation.md, "Public data"). With a salt
(``NEVIS_SPLIT_SALT``) every *draw* a split rule makes is seeded from a keyed hash of the
salt, the dataset and the rule's seed instead of the seed alone; rows a rule places without
drawing (a source's official test set, attribute rules, provided lists) stay where they are.
An empty salt gives the public, reproducible splits of the reference. The salt hides which
images are tested, not their labels (public for every image of a public dataset).

Only a digest of the salt is ever written (the prepared dataset's index, for operators to
audit which salt a dataset was split with); the salt itself never leaves the settings.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np


def salt_digest(salt: str) -> str:
    """16 hex digits naming ``salt`` for audits ("" for no salt); the salt cannot be read back."""
    if not salt:
        return ""
    return hashlib.sha256(b"nevis-split-salt\0" + salt.encode()).hexdigest()[:16]


def split_rng(seed: int, salt: str, dataset: str) -> np.random.RandomState:
    """The generator a rule's draws use: ``seed`` itself unsalted, else a keyed 32-bit seed.

    ``dataset`` keys the draw so two datasets whose rules share a seed draw differently.
    """
    if not salt:
        return np.random.RandomState(seed)
    mac = hmac.new(salt.encode(), f"{dataset}\0{seed}".encode(), hashlib.sha256).digest()
    return np.random.RandomState(int.from_bytes(mac[:4], "big"))


__all__ = ["salt_digest", "split_rng"]
