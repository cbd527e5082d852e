"""The transfer maths (services/core/transfer.py) on hand-computed numbers, and the plain-data
unpickler that reads a learner's state for FT-d's choices (services/store/runs/transfer.py)."""

from __future__ import annotations

import hashlib
import pickle

import numpy as np
import pytest

from services.core.errors import ObjectTooLargeError
from services.core.transfer import (
    FRESH,
    PRETRAINED,
    Choice,
    TaskFact,
    choices_from_state,
    matrix,
    repeats,
    resolution_bucket,
    resolution_slices,
    same_task_budget,
    source_side,
)
from services.store.objects import ObjectInfo
from services.store.runs.transfer import MAX_CHOICES, MAX_STATE_BYTES, state_choices

STREAM = [  # order, dataset, phase, error, source long side
    TaskFact(1, "mnist", "meta_train", 0.10, 28),
    TaskFact(2, "coil20", "meta_train", 0.40, 128),
    TaskFact(3, "mnist", "meta_test", 0.05, 28),
    TaskFact(4, "coil20", "meta_test", 0.30, 128),
    TaskFact(5, "mnist", "meta_test", None, 28),  # a third occurrence, not committed yet
    TaskFact(6, "flowers", "meta_test", 0.70, 500),
    TaskFact(7, "odd", "meta_test", 0.20, None),
]
INDEP = {3: 0.08, 4: 0.25, 5: 0.09, 6: 0.60, 7: 0.40}


def test_each_later_occurrence_is_compared_with_the_first_and_with_indep():
    rows = repeats(STREAM, INDEP)
    assert [(r.dataset, r.first, r.later) for r in rows] == [("mnist", 1, 3), ("coil20", 2, 4), ("mnist", 1, 5)]
    mnist, coil, third = rows
    assert mnist.vs_first == pytest.approx(0.05 - 0.10) and mnist.vs_indep == pytest.approx(0.05 - 0.08)
    assert coil.vs_first == pytest.approx(0.30 - 0.40) and coil.vs_indep == pytest.approx(0.30 - 0.25)
    assert third.vs_first is None and third.vs_indep is None and third.indep_error == 0.09
    assert coil.to_dict()["vs_indep"] == pytest.approx(0.05)


def test_without_an_indep_run_there_is_no_difference_against_it():
    rows = repeats(STREAM, None)
    assert all(r.indep_error is None and r.vs_indep is None for r in rows)
    assert rows[0].vs_first == pytest.approx(-0.05)


def test_resolution_slices_average_the_headline_tasks_per_bucket():
    slices = resolution_slices(STREAM, phase="meta_test", indep=INDEP)
    assert [(s.bucket, s.tasks) for s in slices] == [("≤ 32 px", 1), ("65–128 px", 1), ("> 256 px", 1), ("unknown", 1)]
    assert [s.mean_error for s in slices] == pytest.approx([0.05, 0.30, 0.70, 0.20])
    assert [s.indep_mean_error for s in slices] == pytest.approx([0.08, 0.25, 0.60, 0.40])
    meta_train = resolution_slices(STREAM, phase="meta_train", indep={1: 0.2})
    assert [(s.bucket, s.mean_error, s.indep_mean_error) for s in meta_train] == [
        ("≤ 32 px", pytest.approx(0.10), pytest.approx(0.2)),
        ("65–128 px", pytest.approx(0.40), None),
    ]


@pytest.mark.parametrize(
    ("side", "bucket"),
    [
        (8, "≤ 32 px"),
        (32, "≤ 32 px"),
        (33, "33–64 px"),
        (64, "33–64 px"),
        (256, "129–256 px"),
        (257, "> 256 px"),
        (None, "unknown"),
    ],
)
def test_buckets_include_their_upper_bound(side, bucket):
    assert resolution_bucket(side) == bucket


@pytest.mark.parametrize(
    ("shape", "side"),
    [
        ([28, 28, 1], 28),
        ([480, 640, 3], 640),
        ({"min": [20, 30, 3], "max": [300, 200, 3]}, 300),
        ({"min": [], "max": []}, None),
        ("28x28", None),
        ([0, 5, 3], None),
    ],
)
def test_the_source_side_is_the_long_side_of_its_largest_image(shape, side):
    assert source_side(shape) == side


def test_budgets_match_on_trials_and_steps_only():
    assert same_task_budget(
        {"trials": 2, "steps": 10, "seed": 0, "search": "random"},
        {"trials": 2, "steps": 10, "seed": 3, "search": "gp_ucb"},
    )
    assert not same_task_budget({"trials": 2, "steps": 10}, {"trials": 2, "steps": 20})
    assert not same_task_budget({}, {})


FT_D_STATE = {  # as FT-d's Selection.record() writes it
    2: {"chosen": 1, "knn_error": {1: 0.5}, "fresh_error": 0.7, "fresh_would_win": False},
    3: {"chosen": 1, "knn_error": {1: 0.25, 2: 0.375}, "fresh_error": 0.125, "fresh_would_win": True},
}


def test_the_matrix_holds_every_candidate_and_the_fresh_network_scored_apart():
    choices = choices_from_state(FT_D_STATE)
    assert choices[3] == Choice(3, 1, {1: 0.25, 2: 0.375}, 0.125, True)
    targets, sources, cells = matrix(choices)
    assert (targets, sources) == ([2, 3], [1, 2, FRESH])
    assert cells == [[0.5, None, 0.7], [0.25, 0.375, 0.125]]


def test_pretrained_and_fresh_candidates_come_after_the_tasks():
    state = {
        1: {"chosen": PRETRAINED, "knn_error": {PRETRAINED: 0.2, FRESH: 0.6}, "fresh_error": 0.6},
        2: {"chosen": 1, "knn_error": {PRETRAINED: 0.3, 1: 0.1, FRESH: 0.5}, "fresh_error": 0.5},
    }
    targets, sources, cells = matrix(choices_from_state(state))
    assert targets == [1, 2] and sources == [1, PRETRAINED, FRESH]
    assert cells == [[None, 0.2, 0.6], [0.1, 0.3, 0.5]]


@pytest.mark.parametrize(
    "state",
    [
        None,
        [1, 2],
        {"a": {"chosen": 1, "knn_error": {1: 0.1}}},
        {2: {"chosen": 3, "knn_error": {1: 0.1}}},
        {2: {"chosen": 1, "knn_error": {1: 1.5}}},
        {2: {"chosen": True, "knn_error": {1: 0.1}}},
        {2: {"chosen": 1, "knn_error": {"1": 0.1}}},
        {0: {"chosen": 1, "knn_error": {1: 0.1}}},
    ],
)
def test_a_state_that_is_no_record_of_choices_gives_none(state):
    assert choices_from_state(state) == {}


class _Stored:
    """A minimal stand-in for the session and store state_choices reads."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data

    def scalar(self, _query):
        return None if self.data is None else "runs/1/state.pkl"

    def info(self, key: str) -> ObjectInfo:
        return ObjectInfo(key, len(self.data), hashlib.sha256(self.data).hexdigest())

    def get_bytes(self, _key: str, *, max_bytes: int | None = None) -> bytes:
        if max_bytes is not None and len(self.data) > max_bytes:
            raise ObjectTooLargeError("over")
        return self.data


class Boom:
    def __reduce__(self):
        return (print, ("a learner's pickle ran code",))


def test_the_state_is_read_as_plain_data_only(capsys):
    stored = _Stored(pickle.dumps(FT_D_STATE))
    choices, reason = state_choices(stored, stored, 1)
    assert reason is None and sorted(choices) == [2, 3]
    stored = _Stored(pickle.dumps({2: Boom()}))
    choices, reason = state_choices(stored, stored, 1)
    assert choices == {} and "not a plain record" in reason
    assert capsys.readouterr().out == ""  # the reduce never ran
    choices, reason = state_choices(_Stored(None), _Stored(None), 1)
    assert choices == {} and reason == "no task committed yet"
    numpy_floats = _Stored(pickle.dumps({2: {"chosen": 1, "knn_error": {1: np.float32(0.5)}}}))
    assert state_choices(numpy_floats, numpy_floats, 1)[0] == {}  # a class, refused rather than built


def test_a_state_of_3000_fake_choices_reports_only_the_runs_tasks():
    """The review's state: 3,000 "choices" of 450 candidates each; the run committed 3 tasks.
    (How long it takes is not a unit test's business: the page reads the bounded record stored
    at commit, tests/integration/.../test_transfer_record.py.)"""
    fake = {t: {"chosen": 1, "knn_error": {c: 0.5 for c in range(1, 451)}, "fresh_error": 0.5} for t in range(2, 3002)}
    fake[3] = FT_D_STATE[3]
    stored = _Stored(pickle.dumps(fake))
    assert len(stored.data) < MAX_STATE_BYTES
    choices, reason = state_choices(stored, stored, 1, orders=[1, 2, 3])
    assert reason is None and sorted(choices) == [3]  # task 2's record names candidates it never had
    assert choices[3].knn_errors == {1: 0.25, 2: 0.375}


def test_a_matrix_of_more_tasks_than_shown_keeps_the_first_and_says_so():
    record = {"chosen": FRESH, "knn_error": {FRESH: 0.5}, "fresh_error": 0.5}
    stored = _Stored(pickle.dumps({t: record for t in range(1, MAX_CHOICES + 11)}))
    choices, reason = state_choices(stored, stored, 1, orders=range(1, MAX_CHOICES + 11))
    assert sorted(choices) == list(range(1, MAX_CHOICES + 1))
    assert (
        reason == f"the first {MAX_CHOICES} of the {MAX_CHOICES + 10} tasks the learner recorded choices for are shown"
    )


def test_a_state_over_the_limit_is_not_read():
    stored = _Stored(b"x" * (MAX_STATE_BYTES + 1))
    choices, reason = state_choices(stored, stored, 1)
    assert choices == {} and "over 16 MiB" in reason


def test_the_module_examples_hold():
    import doctest

    from services.core import transfer

    result = doctest.testmod(transfer)
    assert result.attempted >= 9 and result.failed == 0
