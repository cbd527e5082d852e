"""The causal task view: everything a learner may see while it trains one task.

The view holds the current task's train and dev splits and a loader for the train splits
of earlier tasks, and nothing else: no test or dev-test data is ever put in it, so it cannot
leak through attributes or introspection. Asking for a future task or any test
split raises :class:`~services.core.errors.CausalityError` with the reason.

Images come as the reference evaluates them: ``train().images`` and ``dev().images`` are the
central square of each source image at the task resolution. Train splits (current and past)
also carry ``originals``, the larger aspect-preserving stored images that augmenting
learners crop from (:class:`~workers.stream.task_info.Originals`).

A task too large for memory is offered beside ``train()`` as a stream of shards
(``train_stream``, :class:`~workers.stream.shard_stream.ShardStream`); such a view may take its
train split as a loader, so that it is read only by a learner that asks for it whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from services.core.errors import CausalityError
from workers.stream.shard_stream import ShardStream
from workers.stream.task_info import LabelledData, TaskInfo

_FORBIDDEN_SPLITS = ("test", "dev_test")


class CausalTaskView:
    """A :class:`~workers.learners.protocol.TaskView` over one task of a stream.

    Args:
        info: metadata of the current task.
        train: its training split.
        dev: its dev split.
        past: metadata of every earlier task, keyed by order.
        load_past_train: returns the train split of an earlier task (called lazily; the
            harness behind it enforces the same rule again).
        stream_length: number of tasks in the stream, to tell "future" from "unknown".
        load_past_predictor: returns the bytes of the predictor this run committed for an
            earlier task (``save_predictor``'s output); ``None`` where the caller has none
            to offer (a view outside a run).
        load_pretrained: returns the pretrained checkpoint the run was submitted with;
            ``None`` where there is none.
        prepared: what the learner's ``prepare_task`` returned for this task (computed once,
            before the trials, from this same view); ``None`` where it has no such hook.
        train_stream: ``seed -> ShardStream`` over the train split, given where the task is
            large (above ``NEVIS_STREAM_TRAIN_BYTES``); ``None`` otherwise.
    """

    __slots__ = (
        "_info",
        "_train",
        "_dev",
        "_past",
        "_load_past_train",
        "_stream_length",
        "_load_past_predictor",
        "_load_pretrained",
        "_prepared",
        "_train_stream",
    )

    def __init__(
        self,
        info: TaskInfo,
        train: LabelledData | Callable[[], LabelledData],
        dev: LabelledData,
        past: Mapping[int, TaskInfo],
        load_past_train: Callable[[int], LabelledData],
        stream_length: int,
        load_past_predictor: Callable[[int], bytes] | None = None,
        load_pretrained: Callable[[], bytes] | None = None,
        prepared: Any = None,
        train_stream: Callable[[int], ShardStream] | None = None,
    ) -> None:
        if any(order >= info.order for order in past):
            raise CausalityError(
                f"The view of task {info.order} was given tasks that are not in its past: "
                f"{sorted(o for o in past if o >= info.order)}."
            )
        self._info = info
        self._train = train
        self._dev = dev
        self._past = dict(sorted(past.items()))
        self._load_past_train = load_past_train
        self._stream_length = stream_length
        self._load_past_predictor = load_past_predictor
        self._load_pretrained = load_pretrained
        self._prepared = prepared
        self._train_stream = train_stream

    @property
    def info(self) -> TaskInfo:
        return self._info

    @property
    def prepared(self) -> Any:
        """What ``prepare_task`` returned for this task, shared by every trial; ``None`` when
        the learner has no hook or the harness did not run it (multi-worker trials)."""
        return self._prepared

    def train(self) -> LabelledData:
        if callable(self._train):  # a large task's split, read only when asked for whole
            self._train = self._train()
        return self._train

    def train_stream(self, seed: int) -> ShardStream | None:
        """The train split as shuffled batches read a few shards at a time (deterministic per
        ``seed``), where the task is too large to read whole; ``None`` for other tasks."""
        return None if self._train_stream is None else self._train_stream(seed)

    def dev(self) -> LabelledData:
        return self._dev

    def past_tasks(self) -> tuple[TaskInfo, ...]:
        return tuple(self._past.values())

    def past_train(self, order: int) -> LabelledData:
        if not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"past_train takes a task order (int); got {order!r}.")
        if order == self._info.order:
            return self.train()
        if order > self._info.order:
            raise CausalityError(
                f"Task {order} is in the future of task {self._info.order}: a learner may "
                "only see tasks that came before the current one."
            )
        if order not in self._past:
            raise CausalityError(f"Task {order} is not a task of this stream (1..{self._stream_length}).")
        return self._load_past_train(order)

    def past_predictor(self, order: int) -> bytes:
        """The predictor this run kept for an earlier task, as its learner saved it.

        Fetched when asked (one at a time), so a learner that builds on earlier tasks keeps
        references, not a hundred networks, in its state.
        """
        if not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"past_predictor takes a task order (int); got {order!r}.")
        if order >= self._info.order:
            raise CausalityError(
                f"Task {order} is not in the past of task {self._info.order}: predictors exist "
                "only for tasks that came before the current one."
            )
        if order not in self._past:
            raise CausalityError(f"Task {order} is not an earlier task of this run (1..{self._stream_length}).")
        if self._load_past_predictor is None:
            raise CausalityError("This view offers no earlier predictors (it is not part of a run).")
        return self._load_past_predictor(order)

    def pretrained(self) -> bytes:
        """The pretrained checkpoint the run was submitted with (PT, PT+FT); an error if none."""
        if self._load_pretrained is None:
            raise CausalityError("This run was submitted without a pretrained checkpoint.")
        return self._load_pretrained()

    def split(self, name: str, order: int | None = None) -> LabelledData:
        """Any split by name; test and dev-test splits are refused, always."""
        order = self._info.order if order is None else order
        if name in _FORBIDDEN_SPLITS:
            raise CausalityError(
                f"The {name!r} split of task {order} is never shown to a learner: it is "
                "used only by the harness's evaluation."
            )
        if name == "train":
            return self.past_train(order)
        if name == "dev" and order == self._info.order:
            return self._dev
        if name == "dev" and order < self._info.order:
            raise CausalityError(f"Only train splits of earlier tasks are available; asked for 'dev' of {order}.")
        if order > self._info.order:
            return self.past_train(order)  # raises the future-task error
        raise CausalityError(f"Unknown split {name!r}; a learner sees 'train' and 'dev'.")

    def test(self) -> LabelledData:
        """Refused: test labels never reach learner code."""
        return self.split("test")

    def dev_test(self) -> LabelledData:
        """Refused: the dev-test split is held out for evaluation."""
        return self.split("dev_test")

    def __repr__(self) -> str:
        return (
            f"CausalTaskView(task={self._info.order} {self._info.key!r}, "
            f"train={self._info.num_train if callable(self._train) else len(self._train)}, "
            f"dev={len(self._dev)}, past={list(self._past)})"
        )


__all__ = ["CausalTaskView"]
