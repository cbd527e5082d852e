"""The causal task view refuses test splits and future tasks, whatever way they are asked for."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import CausalityError
from workers.learners.protocol import LabelledData, TaskInfo
from workers.stream.task_view import CausalTaskView


def _info(order: int) -> TaskInfo:
    return TaskInfo(
        order=order,
        key=f"{order:03d}-x",
        dataset="shapes:shape",
        title="t",
        year=2000 + order,
        domain=None,
        kind="single",
        num_classes=2,
        class_names=("a", "b"),
        image_size=4,
        num_train=3,
        num_dev=2,
    )


def _data(n: int, value: int) -> LabelledData:
    return LabelledData(np.full((n, 4, 4, 3), value, np.uint8), np.zeros(n, np.int64))


def test_view_has_no_room_for_extra_attributes() -> None:
    v = CausalTaskView(_info(1), _data(1, 0), _data(1, 0), {}, lambda o: _data(1, 0), 1)
    with pytest.raises(AttributeError):
        v.anything = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        v.__dict__


def test_current_and_past_data() -> None:
    calls: list[int] = []
    v = CausalTaskView(
        _info(3),
        _data(3, 30),
        _data(2, 31),
        {1: _info(1), 2: _info(2)},
        lambda o: calls.append(o) or _data(5, o),
        stream_length=5,
    )
    assert len(v.train()) == 3 and len(v.dev()) == 2
    assert [t.order for t in v.past_tasks()] == [1, 2]
    assert int(v.past_train(1).images[0, 0, 0, 0]) == 1 and calls == [1]
    assert v.past_train(3) is v.train()
    assert v.split("train", 2).images[0, 0, 0, 0] == 2


@pytest.mark.parametrize(
    ("ask", "message"),
    [
        (lambda v: v.test(), "'test' split of task 3 is never shown"),
        (lambda v: v.dev_test(), "'dev_test' split of task 3 is never shown"),
        (lambda v: v.split("test", 1), "'test' split of task 1"),
        (lambda v: v.split("dev_test", 1), "'dev_test' split of task 1"),
        (lambda v: v.split("dev", 1), "Only train splits of earlier tasks"),
        (lambda v: v.past_train(4), "Task 4 is in the future of task 3"),
        (lambda v: v.split("train", 5), "Task 5 is in the future of task 3"),
        (lambda v: v.split("dev", 4), "Task 4 is in the future of task 3"),
        (lambda v: v.past_train(0), "not a task of this stream"),
        (lambda v: v.split("labels"), "Unknown split 'labels'"),
    ],
)
def test_forbidden_requests_raise_causality_errors(ask, message) -> None:
    v = CausalTaskView(
        _info(3),
        _data(3, 30),
        _data(2, 31),
        {1: _info(1), 2: _info(2)},
        lambda o: pytest.fail("loader must not be called"),
        stream_length=5,
    )
    with pytest.raises(CausalityError, match=message):
        ask(v)


def test_non_int_orders_are_type_errors() -> None:
    v = CausalTaskView(_info(2), _data(1, 0), _data(1, 0), {1: _info(1)}, lambda o: _data(1, 0), 3)
    with pytest.raises(TypeError):
        v.past_train("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        v.past_train(True)  # type: ignore[arg-type]


def test_a_view_cannot_be_built_with_future_tasks_as_past() -> None:
    with pytest.raises(CausalityError, match="not in its past"):
        CausalTaskView(_info(2), _data(1, 0), _data(1, 0), {3: _info(3)}, lambda o: _data(1, 0), 3)
