"""A tiny folder laid out as the reference (dm_nevis) leaves its prepared datasets, written
without TensorFlow: TFRecord framing, protobuf ``tf.train.Example`` and the base64 pickle of
the metadata are all encoded here, independently of the reader under test.

``write_reference_folder(root)`` writes ``root/stable/`` with

- ``coil20``: single-label, 3 classes named by a ``label_to_id`` map (numpy ints), RGB PNGs
  of 20x12 and 9x15, splits train (2 shards), dev, dev-test, test and the ``train_and_dev``
  union the reference also writes;
- ``sun_attributes``: multi-label, 4 classes in a ``class_names`` list, grey PNGs of two
  sizes, a ``features`` object as TensorFlow Datasets pickles it, splits train and test;
- ``aloi_grey``: a reference dataset this service's streams do not use;
- ``notes``: a folder with a text file, no dataset.

It returns what each dataset holds, in the order the reference wrote it.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import io
import pickle
import struct
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from workers.ingest.readers.tfrecord import masked_crc32c


@dataclasses.dataclass(frozen=True)
class Written:
    """One written example: PNG bytes, label (int or list), the reference's split folder."""

    png: bytes
    label: int | list[int]
    split: str


# --- protobuf wire form of tf.train.Example ---------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _delimited(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def encode_example(features: Mapping[str, bytes | Sequence[int]]) -> bytes:
    """``tf.train.Example`` bytes: a ``bytes`` value becomes a one-item BytesList, a sequence of
    ints a packed Int64List (as TensorFlow's proto3 serialiser writes them)."""
    entries = b""
    for name, value in features.items():
        if isinstance(value, bytes):
            feature = _delimited(1, _delimited(1, value))
        else:
            feature = _delimited(3, _delimited(1, b"".join(_varint(v) for v in value)))
        entries += _delimited(1, _delimited(1, name.encode()) + _delimited(2, feature))
    return _delimited(1, entries)


def frame(payload: bytes) -> bytes:
    """TFRecord framing: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc32c(length)) + payload + struct.pack("<I", masked_crc32c(payload))


def write_tfrecord(path: Path, payloads: Sequence[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(frame(p) for p in payloads))


# --- the metadata pickle ----------------------------------------------------------------------


@contextmanager
def _reference_modules() -> Iterator[tuple[type, type]]:
    """Stand-ins for the reference's ``DatasetMetaData`` and TFDS's ``FeaturesDict`` under their
    real module paths, so the pickle names them as the reference's would."""
    names = [
        "dm_nevis",
        "dm_nevis.datasets_storage",
        "dm_nevis.datasets_storage.handlers",
        "dm_nevis.datasets_storage.handlers.types",
        "tensorflow_datasets",
        "tensorflow_datasets.core",
        "tensorflow_datasets.core.features",
        "tensorflow_datasets.core.features.features_dict",
    ]
    added = {n: types.ModuleType(n) for n in names if n not in sys.modules}
    sys.modules.update(added)

    @dataclasses.dataclass
    class DatasetMetaData:
        num_classes: int
        num_channels: int
        image_shape: tuple
        additional_metadata: dict
        features: Any = None
        preprocessing: str = ""

    class FeaturesDict:
        def __init__(self, spec: dict) -> None:
            self._spec = spec

    for cls, module in ((DatasetMetaData, names[3]), (FeaturesDict, names[7])):
        cls.__module__, cls.__qualname__ = module, cls.__name__
        setattr(sys.modules[module], cls.__name__, cls)
    try:
        yield DatasetMetaData, FeaturesDict
    finally:
        for name in added:
            sys.modules.pop(name, None)


def metadata_bytes(num_classes: int, channels: int, extras: dict, multi: bool = False) -> bytes:
    with _reference_modules() as (meta_cls, features_cls):
        spec = {"multi_label": "Sequence(ClassLabel)", "png_encoded_image": "Image"}
        features = features_cls(spec) if multi else None
        meta = meta_cls(
            num_classes=num_classes,
            num_channels=channels,
            image_shape=(),
            additional_metadata=extras,
            features=features,
        )
        return base64.encodebytes(pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL))


# --- the folder ---------------------------------------------------------------------------------


def png(shape: tuple[int, ...], seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _write_dataset(
    folder: Path,
    splits: dict[str, list[Written]],
    shards: dict[str, int],
    *,
    num_classes: int,
    channels: int,
    extras: dict,
    multi: bool,
) -> None:
    key = "multi_label" if multi else "label"
    counts = collections.defaultdict(int)
    for split, examples in splits.items():
        n = shards.get(split, 1)
        payloads = [
            encode_example({"png_encoded_image": e.png, key: e.label if multi else [e.label]}) for e in examples
        ]
        for shard in range(n):
            write_tfrecord(folder / split / f"data-{shard:05d}-of-{n:05d}", payloads[shard::n])
        counts[split] = len(examples)
    extras = {**extras, "num_data_points_per_split": counts, "splits": sorted(splits)}
    (folder / "metadata").write_bytes(metadata_bytes(num_classes, channels, extras, multi))
    (folder / "status").write_text("ready")


def write_reference_folder(root: Path) -> dict[str, list[Written]]:
    """Write the folder (see the module's doc); returns dataset -> examples in written order
    (``train_and_dev`` left out: it repeats train and dev)."""
    base = Path(root) / "stable"
    seed = iter(range(10_000))
    sizes = [(20, 12), (9, 15)]
    coil = {
        split: [Written(png(sizes[i % 2] + (3,), next(seed)), (i + j) % 3, split) for i in range(count)]
        for j, (split, count) in enumerate((("train", 5), ("dev", 2), ("dev-test", 2), ("test", 3)))
    }
    coil_splits = {**coil, "train_and_dev": coil["train"] + coil["dev"]}
    label_to_id = {"duck": np.int64(0), "cat": np.int64(1), "car": np.int64(2)}
    _write_dataset(
        base / "coil20",
        coil_splits,
        {"train": 2, "train_and_dev": 2},
        num_classes=3,
        channels=3,
        extras={"label_to_id": label_to_id, "task_type": "classification"},
        multi=False,
    )
    sun = {
        split: [
            Written(png(sizes[(i + 1) % 2], next(seed)), sorted({i % 4, (i * 3 + 1) % 4}), split) for i in range(count)
        ]
        for split, count in (("train", 4), ("test", 2))
    }
    _write_dataset(
        base / "sun_attributes",
        sun,
        {},
        num_classes=4,
        channels=1,
        extras={"class_names": ["sky", "grass", "water", "road"]},
        multi=True,
    )
    grey = {"train": [Written(png((8, 8), next(seed)), 0, "train")]}
    _write_dataset(base / "aloi_grey", grey, {}, num_classes=1, channels=1, extras={"labels": ["a"]}, multi=False)
    (base / "notes").mkdir(parents=True)
    (base / "notes" / "README.txt").write_text("not a dataset")
    return {
        "coil20": [e for s in ("train", "dev", "dev-test", "test") for e in coil[s]],
        "sun_attributes": sun["train"] + sun["test"],
    }


__all__ = ["Written", "encode_example", "frame", "metadata_bytes", "png", "write_reference_folder", "write_tfrecord"]
