"""A per-submission storage quota: the bytes of objects one submission's trials may store.

A trial may hand back checkpoints, a predictor and a state of up to their caps each
(``NEVIS_HOST_PREDICTOR_MB``, ``NEVIS_HOST_STATE_MB``), and a run has many trials: without a
quota one submission could fill the object store others share (issue 44, finding 8). The run's
harness actor writes every such object (:class:`~workers.trainer.harness.TaskHarness.put`), so
it keeps the tally: what the submission stored before (a resumed run, a retried attempt, read
once from the store's listing when a task of it begins) plus what it wrote since. A write that
would pass ``NEVIS_SUBMISSION_STORAGE_MB`` is refused before it is stored, with
:class:`StorageQuotaError` naming the setting: the trial fails with that reason, and the task
with it once every trial has."""

from __future__ import annotations

from services.core.errors import NevisError
from services.store import key_layout
from services.store.objects import ObjectStore


class StorageQuotaError(NevisError):
    """A write would take a submission past its storage quota (``NEVIS_SUBMISSION_STORAGE_MB``)."""


class StorageQuota:
    """The bytes one submission has stored, against its quota (``None``: no quota)."""

    def __init__(self, quota_bytes: int | None) -> None:
        self.quota_bytes = quota_bytes
        self._prefix: str | None = None
        self.used = 0

    def begin(self, store: ObjectStore, key_prefix: str) -> None:
        """A task of the submission whose attempt writes under ``key_prefix`` begins: a
        submission seen first is counted from the store's listing of its prefix once."""
        prefix = submission_of(key_prefix)
        if prefix != self._prefix:
            self._prefix = prefix
            self.used = sum(listed.size for listed in store.list_objects(prefix + "/"))

    def charge(self, key: str, size: int) -> None:
        """Count a write of ``size`` bytes, or refuse it (nothing is stored) if it would pass the quota."""
        if self.quota_bytes is not None and self.used + size > self.quota_bytes:
            raise StorageQuotaError(
                f"Storing {key} ({size} bytes) would take this submission past its storage quota: "
                f"{self.used} of {self.quota_bytes} bytes are used (NEVIS_SUBMISSION_STORAGE_MB)."
            )
        self.used += size


def submission_of(key_prefix: str) -> str:
    """The submission prefix (``runs/<id>``) an attempt's key prefix lies under; the prefix
    itself where it is not a run's (a harness pointed elsewhere counts that prefix)."""
    parts = key_prefix.strip("/").split("/")
    if len(parts) >= 2 and parts[0] == key_layout.RUNS and parts[1].isdigit():
        return key_layout.submission_prefix(int(parts[1]))
    return key_prefix.rstrip("/")


__all__ = ["StorageQuota", "StorageQuotaError", "submission_of"]
