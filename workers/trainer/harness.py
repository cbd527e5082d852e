"""The task harness: a Ray actor of harness code that owns storage for one task attempt.

Learner processes hold no store or database credentials; everything they need from storage
goes through this actor, which enforces the causal rule again (only train splits of earlier
tasks), and everything they save (checkpoints, predictors, states) is written by it under
the attempt's key prefix, atomically and checksummed by the object store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.credentials import load_secrets_path
from services.core.errors import CausalityError, NevisError
from services.store.objects import open_store
from workers.learners.protocol import LabelledData
from workers.stream.manifest import TaskSpec
from workers.stream.shards import DatasetIndex, read_shard
from workers.stream.task_data import load_task_data
from workers.trainer.early_stopping import StoppingRule, SuccessiveHalving
from workers.trainer.storage_quota import StorageQuota
from workers.trainer.task_budget import TaskCharge


class TaskHarness:
    """Storage gateway of one run (a Ray actor), pointed at one task attempt at a time."""

    def __init__(
        self, *, store_url: str, s3_endpoint_url: str | None, image_size: int, storage_quota_bytes: int | None = None
    ) -> None:
        """``storage_quota_bytes``: what one submission may store (``NEVIS_SUBMISSION_STORAGE_MB``)."""
        load_secrets_path()  # the store's keys, when they came as a path (remote backends)
        self._store = open_store(store_url, s3_endpoint_url=s3_endpoint_url)
        self._image_size = image_size
        self._past: dict[int, TaskSpec] = {}
        self._current = 0
        self._prefix = "\0"  # matches no key until a task begins
        self._results: dict[int, dict[str, Any]] = {}
        self._cache: dict[int, LabelledData] = {}
        self._predictors: dict[int, str] = {}
        self._pretrained: str | None = None
        self._halving: SuccessiveHalving | None = None
        self._spent: dict[int, dict[int, tuple[int, int]]] = {}
        self._streamed: DatasetIndex | None = None
        self._charge: TaskCharge | None = None
        self._quota = StorageQuota(storage_quota_bytes)

    def begin_task(
        self,
        *,
        past: Mapping[int, TaskSpec],
        current_order: int,
        key_prefix: str,
        past_predictors: Mapping[int, str] | None = None,
        pretrained_key: str | None = None,
        stopping: StoppingRule | None = None,
        streamed: DatasetIndex | None = None,
        flop_cap: float | None = None,
    ) -> None:
        """Serve task ``current_order``: its past (train splits, and the predictors the run
        committed, by key), and writes under ``key_prefix`` only; ``streamed`` is the task's own
        index where its train split is too large to hand over whole (read a shard at a time);
        ``flop_cap`` the ruleset's cap of the task's trials (``budget-<X>``), None without one."""
        predictors = dict(past_predictors or {})
        if any(order >= current_order for order in [*past, *predictors]):
            raise CausalityError(f"Harness of task {current_order} was given non-past tasks.")
        self._past, self._current, self._predictors = dict(past), current_order, predictors
        self._pretrained = pretrained_key
        self._halving = SuccessiveHalving(stopping.rungs, stopping.eta) if stopping and stopping.rungs else None
        self._prefix = key_prefix.rstrip("/") + "/"
        self._quota.begin(self._store, key_prefix)
        self._results.clear()
        self._streamed = streamed
        self._charge = TaskCharge(float(flop_cap)) if flop_cap is not None else None

    def past_train(self, order: int) -> LabelledData:
        """The train split of an earlier task; anything else is a CausalityError."""
        if not isinstance(order, int) or order >= self._current or order not in self._past:
            raise CausalityError(
                f"Task {order!r} is not in the past of task {self._current}: only the train "
                "splits of earlier tasks are available."
            )
        if order not in self._cache:
            data = load_task_data(
                self._store, self._past[order], image_size=self._image_size, splits=("train",), originals=("train",)
            )  # replay may augment, as on the task itself
            self._cache = {order: data.labelled("train")}  # keep one: bounded memory
        return self._cache[order]

    def train_shard(self, number: int) -> LabelledData:
        """Shard ``number`` of the current task's train split (with the originals training
        crops), for a task streamed to its learner; checked against the index like every read."""
        shards = self._streamed.shards["train"] if self._streamed is not None else ()
        if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number < len(shards):
            raise CausalityError(
                f"Task {self._current} has no train shard {number!r}: {len(shards)} shards are streamed."
            )
        images, labels, originals = read_shard(self._store, self._streamed, shards[number], True)
        return LabelledData(images, labels, originals)

    def past_predictor(self, order: int) -> bytes:
        """The predictor the run committed for an earlier task; anything else is a CausalityError."""
        if not isinstance(order, int) or order >= self._current or order not in self._predictors:
            raise CausalityError(
                f"No predictor of task {order!r} is available to task {self._current}: only "
                "earlier tasks that this run committed have one."
            )
        return self._store.get_bytes(self._predictors[order])

    def pretrained(self, _: Any = None) -> bytes:
        """The pretrained checkpoint the run was submitted with."""
        if self._pretrained is None:
            raise CausalityError("This run was submitted without a pretrained checkpoint.")
        return self._store.get_bytes(self._pretrained)

    def rung_report(self, trial_index: int, step: int, dev_error: float) -> bool:
        """A trial's dev error at a rung; whether it may go on (always, without early stopping)."""
        return True if self._halving is None else self._halving.report(int(trial_index), int(step), float(dev_error))

    def budget_report(self, trial_index: int, flops: int, rank: int = 0) -> tuple[bool, int]:
        """A running trial's FLOPs so far on one of its ranks (0 for one-worker trials): whether
        it may go on under the task's cap, and the task's running charge (always on, without a cap)."""
        if self._charge is None:
            return True, 0
        return self._charge.report(trial_index, flops, rank), self._charge.total

    def budget_settle(self, trial_index: int, flops: int) -> None:
        """A trial ended, charged ``flops``: its final charge replaces its interim reports."""
        if self._charge is not None:
            self._charge.settle(trial_index, flops)

    def put(self, key: str, data: bytes) -> dict[str, Any]:
        """Store bytes under this attempt's prefix, within the submission's storage quota
        (:class:`~workers.trainer.storage_quota.StorageQuotaError` otherwise); returns key, size and sha256."""
        if not key.startswith(self._prefix):
            raise NevisError(f"Key {key!r} is outside this task attempt ({self._prefix}).")
        self._quota.charge(key, len(data))
        info = self._store.put_bytes(key, data)
        return {"key": info.key, "size": info.size, "sha256": info.sha256}

    def post_result(self, trial_index: int, metrics: dict[str, Any]) -> None:
        """Mailbox for a multi-worker trial's rank-0 metrics."""
        self._results[int(trial_index)] = metrics

    def take_result(self, trial_index: int) -> dict[str, Any] | None:
        return self._results.pop(int(trial_index), None)

    def add_spent(self, trial_index: int, rank: int, measured: int, reported: int) -> None:
        """What one rank of a multi-worker trial has spent so far (its latest report wins)."""
        ranks = self._spent.setdefault(int(trial_index), {})
        before = ranks.get(int(rank), (0, 0))
        ranks[int(rank)] = (max(before[0], int(measured)), max(before[1], int(reported)))

    def take_spent(self, trial_index: int) -> dict[str, Any] | None:
        """The FLOP fields of a failed multi-worker trial: every reporting rank's sum."""
        ranks = self._spent.pop(int(trial_index), None)
        if not ranks:
            return None
        measured, reported = (sum(v[i] for v in ranks.values()) for i in (0, 1))
        return {
            "flops_measured": measured,
            "flops_reported": reported,
            "flops_source": "reported" if reported else "measured",
        }


__all__ = ["TaskHarness"]
