"""A submission's storage quota (issue 44, finding 8): the run's harness counts what the
submission stored before (read from the store once) and what its trials write, and refuses a
write that would pass ``NEVIS_SUBMISSION_STORAGE_MB`` before storing it, naming the setting."""

from __future__ import annotations

import pytest

from services.core.config import Settings
from services.store.objects import open_store
from workers.trainer.harness import TaskHarness
from workers.trainer.storage_quota import StorageQuotaError, submission_of

QUOTA = 10_000


def harness_at(tmp_path, quota: int | None = QUOTA) -> TaskHarness:
    return TaskHarness(store_url=f"file://{tmp_path}", s3_endpoint_url=None, image_size=16, storage_quota_bytes=quota)


def test_a_write_over_the_quota_fails_naming_the_setting_and_stores_nothing(tmp_path):
    store = open_store(f"file://{tmp_path}")
    store.put_bytes("runs/7/task-001/attempt-1/trial-000/state.pkl", bytes(4_000))  # an earlier task's
    store.put_bytes("runs/8/task-001/attempt-1/trial-000/state.pkl", bytes(9_000))  # another submission's
    harness = harness_at(tmp_path)
    harness.begin_task(past={}, current_order=2, key_prefix="runs/7/task-002/attempt-1")
    harness.put("runs/7/task-002/attempt-1/trial-000/ckpt-0000001.bin", bytes(5_000))  # 9,000 of 10,000
    with pytest.raises(StorageQuotaError, match="NEVIS_SUBMISSION_STORAGE_MB") as refused:
        harness.put("runs/7/task-002/attempt-1/trial-000/predictor.bin", bytes(1_001))
    assert "9000 of 10000 bytes" in str(refused.value)
    assert "runs/7/task-002/attempt-1/trial-000/predictor.bin" not in set(store.list("runs/7/"))
    harness.put("runs/7/task-002/attempt-1/trial-000/predictor.bin", bytes(1_000))  # exactly the quota: stored


def test_each_submission_is_counted_on_its_own_and_none_means_no_quota(tmp_path):
    harness = harness_at(tmp_path)
    harness.begin_task(past={}, current_order=1, key_prefix="runs/1/task-001/attempt-1")
    harness.put("runs/1/task-001/attempt-1/trial-000/state.pkl", bytes(8_000))
    harness.begin_task(past={}, current_order=1, key_prefix="runs/2/task-001/attempt-1")
    harness.put("runs/2/task-001/attempt-1/trial-000/state.pkl", bytes(8_000))  # not the first's bytes
    unlimited = harness_at(tmp_path / "other", quota=None)
    unlimited.begin_task(past={}, current_order=1, key_prefix="runs/3/task-001/attempt-1")
    unlimited.put("runs/3/task-001/attempt-1/trial-000/state.pkl", bytes(50_000))


def test_the_setting_has_a_default_and_keys_map_to_their_submission():
    assert Settings().submission_storage_mb == 65536
    assert submission_of("runs/12/task-003/attempt-2/") == "runs/12"
