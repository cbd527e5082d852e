"""The reference-metadata unpickler cannot be made to build more than its pickle carries
(issue 44): a few bytes asking for ``frozenset(range(4e8))``, a 10 GB ``bytearray`` or a
terabyte NumPy array are refused before the call, fast and without the memory."""

from __future__ import annotations

import base64
import io
import pickle
import resource
import time
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DatasetFormatError
from workers.ingest.readers.bounded_pickle import MAX_ITEMS, BoundedUnpickler
from workers.ingest.readers.reference_metadata import MAX_METADATA_BYTES, read_reference_metadata


class Asks:
    """Pickles as the call ``func(*args)``."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple:
        return (self.func, self.args)


HOSTILE = [
    Asks(frozenset, range(4 * 10**8)),
    Asks(list, range(10**18)),
    Asks(bytearray, 10**10),
    Asks(getattr(np, "_core", np).multiarray._reconstruct, np.ndarray, (10**12,), b"b"),
    Asks(np.ndarray, (10**6, 10**6)),
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda h: h.func.__name__)
def test_a_metadata_pickle_that_asks_for_too_much_is_refused_fast(tmp_path: Path, hostile) -> None:
    (tmp_path / "metadata").write_bytes(base64.encodebytes(pickle.dumps({"num_classes": 2, "x": hostile})))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(DatasetFormatError, match="at most|too large"):
        read_reference_metadata(tmp_path)
    assert time.perf_counter() - started < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # KiB: nothing built


def test_plain_data_within_the_bounds_is_read_as_before() -> None:
    data = {"a": frozenset(range(1000)), "b": bytearray(10), "c": np.arange(MAX_ITEMS // 100), "d": [1, 2]}
    loaded = BoundedUnpickler(io.BytesIO(pickle.dumps(data))).load()
    assert loaded["a"] == data["a"] and loaded["b"] == data["b"] and loaded["d"] == [1, 2]
    assert np.array_equal(loaded["c"], data["c"])


def test_a_metadata_file_over_its_size_limit_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_bytes(b"A" * (MAX_METADATA_BYTES + 1))
    with pytest.raises(DatasetFormatError, match="over the .*-byte limit"):
        read_reference_metadata(tmp_path)
