"""Import of datasets the reference (dm_nevis) prepared: TFRecords of PNGs become Parquet datasets
with the same image bytes, labels, class names and splits; damaged files fail naming the file
and the record; folders that are not datasets of the streams are skipped with a reason. By
default every row keeps the reference's split through ``prepare`` (the reference streams read
it, a re-dealing rule is refused); ``--redeal`` lets the stream's rule deal the rows afresh."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.errors import DataIntegrityError, DatasetFormatError
from services.store.objects import LocalObjectStore
from tests.support.source_fixtures.reference_tfrecords import (
    encode_example,
    frame,
    png,
    write_reference_folder,
    write_tfrecord,
)
from workers.ingest.readers.reference_import import FAILED, IMPORTED, PRESENT, SKIPPED, import_reference
from workers.ingest.readers.reference_metadata import read_reference_metadata
from workers.ingest.readers.tfrecord import (
    TFRecordError,
    crc32c,
    crc32c_bytewise,
    crc32c_vectorised,
    iter_records,
    masked_crc32c,
    parse_example,
)
from workers.stream.formats.parquet_layout import DatasetHeader
from workers.stream.manifest import parse_manifest
from workers.stream.prepare import prepare_stream
from workers.stream.shards import load_index

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


def _read(path: Path) -> tuple[DatasetHeader, dict[str, list]]:
    table = pq.read_table(path)
    header = DatasetHeader.from_metadata(table.schema.metadata, str(path))
    return header, table.to_pydict()


# --- the container and the message ------------------------------------------------------------


def test_crc32c_matches_the_check_value_and_the_byte_loop() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    for size in (0, 1, 511, 512, 4099, 70_001):
        data = os.urandom(size)
        assert crc32c_vectorised(data) == crc32c_bytewise(data)
    # TFRecord's masking: rotate right by 15, add 0xa282ead8
    assert masked_crc32c(b"123456789") == ((0xE3069283 >> 15 | 0xE3069283 << 17) + 0xA282EAD8) & 0xFFFFFFFF


def _protobuf_example_class() -> type:
    """tf.train.Example built from a descriptor at run time: the real protobuf serialiser, to
    check the hand-written parser (and the fixture's encoder) against."""
    proto = descriptor_pb2.FileDescriptorProto(name="nevis_test_example.proto", package="nevistest", syntax="proto3")
    label = descriptor_pb2.FieldDescriptorProto
    lists = (("BytesList", label.TYPE_BYTES), ("FloatList", label.TYPE_FLOAT), ("Int64List", label.TYPE_INT64))
    for name, kind in lists:
        message = proto.message_type.add(name=name)
        message.field.add(name="value", number=1, type=kind, label=label.LABEL_REPEATED)
    feature = proto.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, name in enumerate(("bytes_list", "float_list", "int64_list"), start=1):
        feature.field.add(
            name=name,
            number=number,
            type=label.TYPE_MESSAGE,
            label=label.LABEL_OPTIONAL,
            type_name=f".nevistest.{['BytesList', 'FloatList', 'Int64List'][number - 1]}",
            oneof_index=0,
        )
    features = proto.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=label.TYPE_STRING, label=label.LABEL_OPTIONAL)
    entry.field.add(
        name="value", number=2, type=label.TYPE_MESSAGE, label=label.LABEL_OPTIONAL, type_name=".nevistest.Feature"
    )
    features.field.add(
        name="feature",
        number=1,
        type=label.TYPE_MESSAGE,
        label=label.LABEL_REPEATED,
        type_name=".nevistest.Features.FeatureEntry",
    )
    example = proto.message_type.add(name="Example")
    example.field.add(
        name="features", number=1, type=label.TYPE_MESSAGE, label=label.LABEL_OPTIONAL, type_name=".nevistest.Features"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("nevistest.Example"))


def test_parse_example_reads_what_protobuf_serialises_and_what_the_fixture_encodes() -> None:
    example_class = _protobuf_example_class()
    message = example_class()
    message.features.feature["png_encoded_image"].bytes_list.value.append(b"\x89PNG bytes")
    message.features.feature["multi_label"].int64_list.value.extend([0, 5, 300, -2])
    message.features.feature["score"].float_list.value.extend([0.5, -1.25])
    message.features.feature["empty"].int64_list.SetInParent()
    parsed = parse_example(message.SerializeToString())
    assert parsed == {
        "png_encoded_image": [b"\x89PNG bytes"],
        "multi_label": [0, 5, 300, -2],
        "score": [0.5, -1.25],
        "empty": [],
    }
    ours = encode_example({"png_encoded_image": b"abc", "label": [7]})
    again = example_class.FromString(ours)
    assert again.features.feature["label"].int64_list.value == [7]
    assert parse_example(ours) == {"png_encoded_image": [b"abc"], "label": [7]}


def test_records_stream_in_order_and_a_bad_crc_or_a_truncation_names_file_and_record(tmp_path: Path) -> None:
    path = tmp_path / "data-00000-of-00001"
    payloads = [b"first", b"second record", b"third"]
    write_tfrecord(path, payloads)
    assert list(iter_records(path)) == payloads

    raw = bytearray(path.read_bytes())
    second = len(frame(b"first"))
    raw[second + 12 + 3] ^= 0xFF  # a byte inside the second record's data
    path.write_bytes(bytes(raw))
    bad_data = rf"{path}: record 1 \(byte {second}\).*data \(13 bytes\) fails its CRC-32C"
    with pytest.raises(TFRecordError, match=bad_data):
        list(iter_records(path))

    raw[second + 12 + 3] ^= 0xFF
    raw[second + 2] ^= 0x01  # the second record's length
    path.write_bytes(bytes(raw))
    with pytest.raises(TFRecordError, match=r"record 1 .*length fails its CRC-32C"):
        list(iter_records(path))

    write_tfrecord(path, payloads)
    path.write_bytes(path.read_bytes()[:-6])
    with pytest.raises(TFRecordError, match=rf"{path}: record 2 .*truncated.*6 bytes short"):
        list(iter_records(path))
    path.write_bytes(path.read_bytes()[: second + 5])
    with pytest.raises(TFRecordError, match=r"record 1 .*truncated inside the record's header"):
        list(iter_records(path))


def test_the_metadata_pickle_is_read_without_the_reference(tmp_path: Path) -> None:
    written = write_reference_folder(tmp_path)
    assert written
    meta = read_reference_metadata(tmp_path / "stable" / "coil20")
    assert (meta.num_classes, meta.num_channels) == (3, 3)
    assert meta.class_names == ("duck", "cat", "car") and meta.class_names_from == "label_to_id"
    assert meta.split_counts == {"train": 5, "dev": 2, "dev-test": 2, "test": 3, "train_and_dev": 7}


def test_a_pickle_cannot_run_code_while_the_metadata_is_read(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self) -> tuple:
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    (tmp_path / "metadata").write_bytes(base64.encodebytes(pickle.dumps({"num_classes": 2, "x": Boom()})))
    meta = read_reference_metadata(tmp_path)
    assert meta.num_classes == 2 and meta.class_names is None
    assert not (tmp_path / "ran").exists()


# --- the import ---------------------------------------------------------------------------------


def test_import_keeps_images_labels_class_names_and_splits(tmp_path: Path) -> None:
    written = write_reference_folder(tmp_path / "nevis_data")
    offline = tmp_path / "offline"
    outcomes = {o.folder: o for o in import_reference(tmp_path / "nevis_data", offline)}
    assert {k: o.status for k, o in outcomes.items()} == {
        "coil20": IMPORTED,
        "sun_attributes": IMPORTED,
        "aloi_grey": SKIPPED,
        "notes": SKIPPED,
    }
    assert "not a source of any NEVIS'22 stream" in outcomes["aloi_grey"].detail
    assert "no metadata file and no data-*-of-* TFRecord shards" in outcomes["notes"].detail

    header, rows = _read(offline / "coil20.parquet")
    expected = written["coil20"]
    assert header.kind == "single" and header.class_names == ("duck", "cat", "car") and header.official_split
    assert header.source["reference_dataset"] == "coil20"
    assert header.source["split_mode"] == "reference" and outcomes["coil20"].split_mode == "reference"
    assert rows["image"] == [e.png for e in expected]  # the PNG bytes, unchanged, in written order
    assert rows["label"] == [e.label for e in expected]
    assert rows["encoding"] == ["PNG"] * len(expected)
    assert {(h, w) for h, w in zip(rows["height"], rows["width"], strict=True)} == {(20, 12), (9, 15)}
    names = {"train": "train", "dev": "dev", "dev-test": "dev_test", "test": "test"}
    assert rows["attr.reference_split"] == [names[e.split] for e in expected]
    source_split = {"train": "train", "dev": "train", "dev-test": "val", "test": "test"}
    assert rows["split"] == [source_split[e.split] for e in expected]
    assert outcomes["coil20"].rows == len(expected) == 12  # train_and_dev (their union) is not read twice

    header, rows = _read(offline / "sun_attributes.parquet")
    expected = written["sun_attributes"]
    assert header.kind == "multi" and header.class_names == ("sky", "grass", "water", "road")
    assert rows["labels"] == [e.label for e in expected] and rows["image"] == [e.png for e in expected]
    assert rows["channels"] == [1] * len(expected)
    assert rows["split"] == [e.split for e in expected]

    again = import_reference(tmp_path / "nevis_data", offline, names=["coil20"])
    assert [(o.folder, o.status, o.split_mode) for o in again] == [("coil20", PRESENT, "reference")]
    other = import_reference(tmp_path / "nevis_data", offline, names=["coil20"], redeal=True)[0]
    assert other.status == PRESENT and "split mode 'reference', not 'redeal': --force --redeal" in other.detail


def test_a_corrupt_record_fails_its_dataset_only_and_leaves_no_file(tmp_path: Path) -> None:
    write_reference_folder(tmp_path)
    shard = tmp_path / "stable" / "coil20" / "test" / "data-00000-of-00001"
    raw = bytearray(shard.read_bytes())
    raw[-10] ^= 0xFF  # inside the last record's data
    shard.write_bytes(bytes(raw))
    outcomes = {o.folder: o for o in import_reference(tmp_path, tmp_path / "offline")}
    assert outcomes["coil20"].status == FAILED
    assert f"{shard}: record 2 " in outcomes["coil20"].detail and "fails its CRC-32C" in outcomes["coil20"].detail
    assert not (tmp_path / "offline" / "coil20.parquet").exists()
    assert outcomes["sun_attributes"].status == IMPORTED


def test_a_truncated_shard_and_a_missing_shard_fail_with_their_names(tmp_path: Path) -> None:
    write_reference_folder(tmp_path)
    shard = tmp_path / "stable" / "coil20" / "train" / "data-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-20])
    outcome = import_reference(tmp_path, tmp_path / "offline", names=["coil20"])[0]
    assert outcome.status == FAILED and f"{shard}: record 1 " in outcome.detail and "truncated" in outcome.detail
    shard.unlink()
    outcome = import_reference(tmp_path, tmp_path / "offline", names=["coil20"])[0]
    assert outcome.status == FAILED and "shards data-<i>-of-<n> are not all there" in outcome.detail


def test_a_shard_that_lost_whole_records_disagrees_with_the_metadata(tmp_path: Path) -> None:
    write_reference_folder(tmp_path)
    shard = tmp_path / "stable" / "coil20" / "dev" / "data-00000-of-00001"
    write_tfrecord(shard, [encode_example({"png_encoded_image": png((4, 4, 3), 1), "label": [0]})])
    outcome = import_reference(tmp_path, tmp_path / "offline", names=["coil20"])[0]
    assert outcome.status == FAILED
    assert "the metadata counts 2 records in this split, its shards hold 1" in outcome.detail


def test_a_dataset_not_ready_or_not_asked_for_is_skipped(tmp_path: Path) -> None:
    write_reference_folder(tmp_path)
    (tmp_path / "stable" / "coil20" / "status").write_text("not_ready")
    outcomes = import_reference(tmp_path, tmp_path / "offline", names=["coil20", "mnist"])
    assert [(o.folder, o.status) for o in outcomes] == [("coil20", SKIPPED), ("mnist", SKIPPED)]
    assert "'not_ready'" in outcomes[0].detail and "no folder 'mnist'" in outcomes[1].detail


# --- the command ----------------------------------------------------------------------------------


def _row(output: str, key: str) -> str:
    return " ".join(next(line for line in output.splitlines() if line.startswith(f"│ {key} ")).split())


def test_the_command_prints_a_row_per_folder(
    settings_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    offline = tmp_path / "offline"
    monkeypatch.setenv("NEVIS_OFFLINE_DATA_DIR", str(offline))
    get_settings.cache_clear()
    write_reference_folder(tmp_path / "ref")
    result = runner.invoke(app, ["data", "import-reference", str(tmp_path / "ref")], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "│ imported │ reference │ 12 │" in _row(result.stdout, "coil20")
    assert "skipped" in _row(result.stdout, "notes") and "skipped" in _row(result.stdout, "aloi_grey")
    assert (offline / "sun_attributes.parquet").is_file()
    closing = " ".join(result.stdout.split())
    assert "Split mode 'reference'" in closing and "nevis22-full-reference or nevis22-short-reference" in closing

    result = runner.invoke(
        app, ["data", "import-reference", str(tmp_path / "ref"), "-d", "coil20", "--force", "--redeal"], env=WIDE
    )
    assert result.exit_code == 0, result.output
    assert "│ imported │ redeal │ 12 │" in _row(result.stdout, "coil20")
    assert "Split mode 'redeal' (--redeal)" in " ".join(result.stdout.split())

    shard = tmp_path / "ref" / "stable" / "sun_attributes" / "test" / "data-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:-3])
    result = runner.invoke(
        app, ["data", "import-reference", str(tmp_path / "ref"), "--datasets", "sun_attributes", "--force"], env=WIDE
    )
    assert isinstance(result.exception, DataIntegrityError)
    assert "failed" in _row(result.stdout, "sun_attributes")
    assert "sun_attributes" in str(result.exception)


def _variant_tasks(stream: str, **num_classes: int) -> list[dict]:
    """The stream's first task of each fixture dataset, renumbered, with the fixtures' class counts."""
    doc = json.loads((Path(__file__).resolve().parents[3] / f"workers/stream/manifests/{stream}.json").read_text())
    tasks = [next(t for t in doc["tasks"] if t["dataset"] == f"nevis:{key}") for key in num_classes]
    return [
        {**task, "order": i + 1, "num_classes": n}
        for i, (task, n) in enumerate(zip(tasks, num_classes.values(), strict=True))
    ]


def _prepare(tmp_path: Path, offline: Path, stream: str, tasks: list[dict]):
    doc = json.loads((Path(__file__).resolve().parents[3] / f"workers/stream/manifests/{stream}.json").read_text())
    manifest = parse_manifest({**doc, "name": "imported", "tasks": tasks})
    store = LocalObjectStore(tmp_path / "store")
    report = prepare_stream(
        manifest, store, image_size=8, offline_dir=offline, accept_count_change=True
    )  # fixtures: far fewer classes than pinned
    return store, {item.dataset: item.counts for item in report.datasets}


def _prepared_rows(store: LocalObjectStore, dataset: str) -> dict[str, list[int]]:
    """Each prepared split's source rows (the shards' ``rows``), sorted."""
    index = load_index(store, dataset, 8)
    assert index is not None
    out = {}
    for split, shards in index.shards.items():
        rows = [np.load(io.BytesIO(store.get_bytes(s.key)))["rows"] for s in shards]
        out[split] = sorted(int(r) for r in np.concatenate(rows)) if rows else []
    return out


def test_a_default_import_keeps_every_rows_reference_split_through_prepare(tmp_path: Path) -> None:
    """The shipped reference stream prepares each imported row into the split the reference
    gave it (row by row, not only in count); the parent stream's rule, which would re-deal
    them, is refused naming what to do instead."""
    written = write_reference_folder(tmp_path / "ref")
    offline = tmp_path / "offline"
    outcomes = import_reference(tmp_path / "ref", offline, names=["coil20", "sun_attributes"])
    assert [(o.status, o.split_mode) for o in outcomes] == [(IMPORTED, "reference")] * 2

    tasks = _variant_tasks("nevis22-full-reference", coil20=3)
    assert tasks[0]["split"]["attribute"] == "reference_split"
    store, counts = _prepare(tmp_path, offline, "nevis22-full-reference", tasks)
    assert counts["nevis:coil20"] == {"train": 5, "dev": 2, "dev_test": 2, "test": 3}
    names = {"train": "train", "dev": "dev", "dev-test": "dev_test", "test": "test"}
    expected: dict[str, list[int]] = {split: [] for split in names.values()}
    for row, example in enumerate(written["coil20"]):  # the file's rows, in written order
        expected[names[example.split]].append(row)
    assert _prepared_rows(store, "nevis:coil20") == expected

    # the fixture's sun_attributes has no dev or dev-test: the rule says so rather than guess
    tasks = _variant_tasks("nevis22-full-reference", sun_attributes=4)
    with pytest.raises(DatasetFormatError, match=r"'reference_split' values no row has: \['dev', 'dev_test'\]"):
        _prepare(tmp_path, offline, "nevis22-full-reference", tasks)

    parent = _variant_tasks("nevis22-full", coil20=3)
    with pytest.raises(DatasetFormatError, match="imported from the reference keeping") as caught:
        _prepare(tmp_path, offline, "nevis22-full", parent)
    message = str(caught.value)
    assert "'nevis:coil20'" in message and "nevis22-full-reference" in message and "--force --redeal" in message


def test_a_redealt_import_is_dealt_by_the_stream_rule_and_a_download_has_no_reference_split(tmp_path: Path) -> None:
    """``redeal``: the parent stream's ``random`` rule deals the same rows afresh (the result
    and the file say so). A reference stream on a file without the reference's split (a
    converted download) stops naming the attribute and the import."""
    write_reference_folder(tmp_path / "ref")
    offline = tmp_path / "offline"
    outcomes = import_reference(tmp_path / "ref", offline, names=["coil20", "sun_attributes"], redeal=True)
    assert [(o.status, o.split_mode) for o in outcomes] == [(IMPORTED, "redeal")] * 2
    header, _ = _read(offline / "coil20.parquet")
    assert header.source["split_mode"] == "redeal"
    _, counts = _prepare(tmp_path, offline, "nevis22-full", _variant_tasks("nevis22-full", coil20=3, sun_attributes=4))
    assert sum(counts["nevis:coil20"].values()) == 12 and sum(counts["nevis:sun_attributes"].values()) == 6
    assert counts["nevis:coil20"] != {"train": 5, "dev": 2, "dev_test": 2, "test": 3}  # 56/12/12/20 of 12 rows

    table = pq.read_table(offline / "coil20.parquet")
    pq.write_table(table.drop(["attr.reference_split"]), offline / "coil20.parquet")
    tasks = _variant_tasks("nevis22-full-reference", coil20=3)
    with pytest.raises(DatasetFormatError, match=r"attr\.reference_split.*nevis data import-reference"):
        _prepare(tmp_path / "again", offline, "nevis22-full-reference", tasks)
