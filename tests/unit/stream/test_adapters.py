"""Adapters: the registry, sklearn digits, the npz + JSON format, idx, CIFAR, image folders.

Every local-file format is exercised on tiny files written into ``tmp_path``.
"""

from __future__ import annotations

import gzip
import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from services.core.errors import (
    DataIntegrityError,
    DatasetFormatError,
    DatasetNotFoundError,
    InvalidKeyError,
    UnknownNameError,
)
from workers.stream.adapters import AdapterContext, find_dataset, get_adapter, load_dataset
from workers.stream.adapters.base import file_checksum
from workers.stream.adapters.idx import read_idx
from workers.stream.adapters.npz_folder import normalise_name


def _write_pair(folder: Path, stem: str, *, n: int = 30, classes: int = 3, meta=None) -> Path:
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, size=(n, 12, 10), dtype=np.uint8)  # grey, no channel axis
    labels = (np.arange(n) % classes).astype(np.int64)
    npz = folder / f"{stem}.npz"
    np.savez(npz, images=images, labels=labels)
    doc = {
        "name": stem,
        "nevis_name": "Olivetti Face Dataset",
        "num_classes": classes,
        "class_names": [f"c{i}" for i in range(classes)],
        "npz_sha256": file_checksum(npz),
        "split": {
            "rule": "stratified",
            "train": list(range(0, 18)),
            "val": list(range(18, 24)),
            "test": list(range(24, n)),
        },
    }
    doc.update(meta or {})
    (folder / f"{stem}.json").write_text(json.dumps(doc))
    return npz


# -- registry -----------------------------------------------------------------------------


def test_an_unknown_source_suggests_the_closest_one():
    with pytest.raises(UnknownNameError, match="Did you mean 'sklearn'"):
        get_adapter("sklern")


@pytest.mark.parametrize("key", ["digits", "sklearn:", ":digits"])
def test_a_key_without_source_and_name_is_refused(key):
    with pytest.raises(InvalidKeyError, match="<source>:<name>"):
        find_dataset(key, AdapterContext())


@pytest.mark.parametrize("name", ["../etc", "a/b", ".hidden"])
def test_a_name_that_is_not_a_safe_key_segment_is_refused(name):
    with pytest.raises(InvalidKeyError):
        find_dataset(f"offline:{name}", AdapterContext(offline_dir=Path("/tmp")))


# -- sklearn ------------------------------------------------------------------------------


def test_sklearn_digits_are_8x8_grey_uint8_with_ten_classes():
    raw = load_dataset("sklearn:digits", AdapterContext())
    assert raw.images.shape == (1797, 8, 8, 1) and raw.images.dtype == np.uint8
    assert raw.images.max() == 255 and raw.images.min() == 0
    assert raw.class_names == tuple(str(i) for i in range(10))
    assert np.bincount(raw.labels).min() > 170
    assert raw.given_splits is None and len(raw.source_checksum) == 64


def test_an_unknown_sklearn_dataset_suggests_digits():
    with pytest.raises(UnknownNameError, match="Did you mean 'digits'"):
        find_dataset("sklearn:digit", AdapterContext())


# -- npz + JSON ---------------------------------------------------------------------------


def test_an_npz_pair_loads_with_its_provided_split(tmp_path):
    _write_pair(tmp_path, "faces")
    raw = load_dataset("offline:faces", AdapterContext(offline_dir=tmp_path))
    assert raw.images.shape == (30, 12, 10, 1)
    assert raw.kind == "single" and raw.class_names == ("c0", "c1", "c2")
    assert raw.given_splits.train.tolist() == list(range(18))
    assert raw.given_splits.val.tolist() == list(range(18, 24))
    assert raw.source_checksum == file_checksum(tmp_path / "faces.npz")
    assert raw.metadata["nevis_name"] == "Olivetti Face Dataset"


def test_nevis_names_are_found_through_the_sidecar_but_offline_names_are_not(tmp_path):
    _write_pair(tmp_path, "orl_faces")
    ctx = AdapterContext(offline_dir=tmp_path)
    assert find_dataset("nevis:olivetti_face", ctx) is None
    assert load_dataset("nevis:olivetti_face", ctx).num_examples == 30
    assert find_dataset("offline:olivetti_face", ctx) is not None
    assert find_dataset("nevis:orl_faces", ctx) is None  # the file stem works too


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("olivetti_face", "Olivetti Face Dataset"),
        ("mpeg7", "MPEG-7"),
        ("caltech101", "Caltech 101"),
        ("fashion_mnist", "Fashion MNIST"),
    ],
)
def test_names_are_compared_without_case_punctuation_or_a_trailing_dataset(a, b):
    assert normalise_name(a) == normalise_name(b)


def test_a_missing_pair_says_where_it_looked_and_how_to_provide_it(tmp_path):
    missing = find_dataset("offline:nothing", AdapterContext(offline_dir=tmp_path))
    assert missing.dataset == "offline:nothing"
    assert str(tmp_path) in missing.looked_in and "NEVIS_OFFLINE_DATA_DIR" in missing.looked_in
    assert "<name>.npz" in missing.how_to_provide and "<name>.json" in missing.how_to_provide
    with pytest.raises(DatasetNotFoundError, match=r"nothing\.npz"):
        load_dataset("offline:nothing", AdapterContext(offline_dir=tmp_path))


def test_an_unset_offline_folder_is_named_as_unset():
    missing = find_dataset("nevis:mnist", AdapterContext(offline_dir=None))
    assert missing.looked_in == "NEVIS_OFFLINE_DATA_DIR is not set"


def test_an_npz_that_does_not_match_its_recorded_checksum_is_refused(tmp_path):
    _write_pair(tmp_path, "faces", meta={"npz_sha256": "0" * 64})
    with pytest.raises(DataIntegrityError, match="faces.npz"):
        load_dataset("offline:faces", AdapterContext(offline_dir=tmp_path))


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        ({"class_names": ["only-one"], "num_classes": 1}, "labels must lie in 0..0"),
        ({"split": {"train": [0, 1], "test": [1, 2]}}, "shares rows"),
        ({"split": {"train": [0, 99], "test": [1]}}, "outside"),
        ({"num_classes": 5}, "num_classes is 5"),
    ],
    ids=["labels-out-of-range", "overlapping-split", "row-out-of-range", "class-count"],
)
def test_a_malformed_pair_names_the_problem(tmp_path, meta, match):
    _write_pair(tmp_path, "faces", meta=meta)
    with pytest.raises(DatasetFormatError, match=match):
        load_dataset("offline:faces", AdapterContext(offline_dir=tmp_path))


# -- idx ----------------------------------------------------------------------------------


def _idx_bytes(array: np.ndarray) -> bytes:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    return header + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(">u1").tobytes()


def _write_idx_folder(folder: Path, *, gz: bool) -> tuple[np.ndarray, np.ndarray]:
    folder.mkdir(parents=True)
    rng = np.random.RandomState(3)
    x = rng.randint(0, 256, size=(9, 5, 5), dtype=np.uint8)
    y = (np.arange(9) % 4).astype(np.uint8)
    parts = {
        "train-images-idx3-ubyte": x[:6],
        "train-labels-idx1-ubyte": y[:6],
        "t10k-images-idx3-ubyte": x[6:],
        "t10k-labels-idx1-ubyte": y[6:],
    }
    for name, array in parts.items():
        data = _idx_bytes(array)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return x, y


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
def test_idx_files_load_with_their_official_split(tmp_path, gz):
    x, y = _write_idx_folder(tmp_path / "tiny", gz=gz)
    raw = load_dataset("idx:tiny", AdapterContext(offline_dir=tmp_path))
    assert np.array_equal(raw.images[..., 0], x) and raw.labels.tolist() == y.tolist()
    assert raw.given_splits.train.tolist() == list(range(6))
    assert raw.given_splits.test.tolist() == [6, 7, 8] and raw.given_splits.official
    assert raw.class_names == ("0", "1", "2", "3")


def test_an_idx_folder_missing_a_file_names_it(tmp_path):
    _write_idx_folder(tmp_path / "tiny", gz=True)
    (tmp_path / "tiny" / "t10k-labels-idx1-ubyte.gz").unlink()
    missing = find_dataset("idx:tiny", AdapterContext(offline_dir=tmp_path))
    assert "t10k-labels-idx1-ubyte" in missing.looked_in


@pytest.mark.parametrize(
    ("data", "match"),
    [(b"\x00\x01\x08\x01\x00\x00\x00\x02ab", "magic"), (b"\x00\x00\x08\x01\x00\x00\x00\x05ab", "promises")],
    ids=["bad-magic", "truncated"],
)
def test_a_broken_idx_file_is_a_format_error(tmp_path, data, match):
    path = tmp_path / "x-idx1-ubyte"
    path.write_bytes(data)
    with pytest.raises(DatasetFormatError, match=match):
        read_idx(path)


# -- CIFAR --------------------------------------------------------------------------------


def _write_cifar10(folder: Path) -> np.ndarray:
    folder.mkdir(parents=True)
    rng = np.random.RandomState(4)
    data = rng.randint(0, 256, size=(12, 3072), dtype=np.uint8)
    for i in range(5):
        batch = {b"data": data[2 * i : 2 * i + 2], b"labels": [i, (i + 1) % 10]}
        (folder / f"data_batch_{i + 1}").write_bytes(pickle.dumps(batch, protocol=2))
    test = {b"data": data[10:], b"labels": [3, 4]}
    (folder / "test_batch").write_bytes(pickle.dumps(test, protocol=2))
    meta = {b"label_names": [f"class{i}".encode() for i in range(10)]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return data


def test_cifar10_batches_load_as_hwc_images_with_the_official_split(tmp_path):
    data = _write_cifar10(tmp_path / "cifar" / "cifar-10-batches-py")
    raw = load_dataset("cifar:cifar", AdapterContext(offline_dir=tmp_path))
    assert raw.images.shape == (12, 32, 32, 3)
    # CIFAR rows are channel planes: red 0..1023, green 1024..2047, blue 2048..3071.
    assert raw.images[0, 0, 1].tolist() == [data[0, 1], data[0, 1025], data[0, 2049]]
    assert raw.class_names[3] == "class3"
    assert raw.given_splits.test.tolist() == [10, 11]
    assert raw.labels[10:].tolist() == [3, 4]


class _Sneaky:
    def __reduce__(self):
        return (Path.cwd, ())


def test_a_cifar_batch_that_would_run_code_is_refused(tmp_path):
    _write_cifar10(tmp_path / "cifar")
    (tmp_path / "cifar" / "test_batch").write_bytes(pickle.dumps({b"data": _Sneaky()}))
    with pytest.raises(DatasetFormatError, match="refusing"):
        load_dataset("cifar:cifar", AdapterContext(offline_dir=tmp_path))


# -- image folders ------------------------------------------------------------------------


def test_an_image_folder_gives_one_class_per_sub_folder(tmp_path):
    root = tmp_path / "pets"
    for label, name in enumerate(["dog", "cat"]):
        (root / name).mkdir(parents=True)
        for i in range(3):
            pixels = np.full((6 + i, 7, 3), 40 * label + i, dtype=np.uint8)  # sizes differ
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    (root / "cat" / "notes.txt").write_text("not an image")
    raw = load_dataset("images:pets", AdapterContext(offline_dir=tmp_path, image_size=16))
    assert raw.class_names == ("cat", "dog")
    assert raw.images.shapes.tolist() == [[6, 7], [7, 7], [8, 7]] * 2  # each its own size
    assert raw.images[5].shape == (8, 7, 3) and (raw.images[5] == 2).all()  # dog, i = 2
    assert raw.labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert raw.given_splits is None


def test_an_image_folder_with_train_and_test_keeps_that_split(tmp_path):
    for part, count in (("train", 4), ("test", 2)):
        for name in ("a", "b"):
            (tmp_path / "set" / part / name).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(np.full((5, 5), i, np.uint8)).save(tmp_path / "set" / part / name / f"{i}.png")
    raw = load_dataset("images:set", AdapterContext(offline_dir=tmp_path))
    assert len(raw.images) == 12 and raw.images[11].shape == (5, 5, 1)  # grey until stored
    assert raw.given_splits.train.tolist() == list(range(8))
    assert raw.given_splits.test.tolist() == [8, 9, 10, 11]
