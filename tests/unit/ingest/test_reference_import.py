"""Import of datasets the reference (dm_nevis) prepared: TFRecords of PNGs become Parquet datasets
with the same image bytes, labels, class names and splits; damaged files fail naming the file
and the record; folders that are not datasets of the streams are skipped with a reason."""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.errors import DataIntegrityError
from services.store.objects import LocalObjectStore
from tests.support.source_fixtures.reference_tfrecords import (
    encode_example,
    frame,
    png,
    write_reference_folder,
    write_tfrecord,
)
from workers.ingest.readers.reference_metadata import read_reference_metadata
from workers.ingest.readers.reference_tfrecords import FAILED, IMPORTED, PRESENT, SKIPPED, import_reference
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

    again = {o.folder: o.status for o in import_reference(tmp_path / "nevis_data", offline, names=["coil20"])}
    assert again == {"coil20": PRESENT}


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
    assert "imported" in _row(result.stdout, "coil20") and " 12 " in f" {_row(result.stdout, 'coil20')} "
    assert "skipped" in _row(result.stdout, "notes") and "skipped" in _row(result.stdout, "aloi_grey")
    assert (offline / "sun_attributes.parquet").is_file()

    shard = tmp_path / "ref" / "stable" / "sun_attributes" / "test" / "data-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:-3])
    result = runner.invoke(
        app, ["data", "import-reference", str(tmp_path / "ref"), "--datasets", "sun_attributes", "--force"], env=WIDE
    )
    assert isinstance(result.exception, DataIntegrityError)
    assert "failed" in _row(result.stdout, "sun_attributes")
    assert "sun_attributes" in str(result.exception)


def test_imported_datasets_prepare_and_the_reference_split_can_be_kept_exactly(tmp_path: Path) -> None:
    """Through ``nevis data prepare``: a ``by_attribute`` rule on ``reference_split`` gives each
    row the reference's own split; the stream's ``random`` rule deals the same rows afresh."""
    write_reference_folder(tmp_path / "ref")
    offline = tmp_path / "offline"
    assert [o.status for o in import_reference(tmp_path / "ref", offline, names=["coil20", "sun_attributes"])] == [
        IMPORTED,
        IMPORTED,
    ]
    exact = {
        "kind": "by_attribute",
        "attribute": "reference_split",
        "seed": 0,
        "values": {"train": ["train"], "dev": ["dev"], "dev_test": ["dev_test"], "test": ["test"]},
    }
    doc = json.loads((Path(__file__).resolve().parents[3] / "workers/stream/manifests/nevis22-full.json").read_text())
    coil = next(t for t in doc["tasks"] if t["dataset"] == "nevis:coil20")
    sun = next(t for t in doc["tasks"] if t["dataset"] == "nevis:sun_attributes")
    tasks = [{**coil, "order": 1, "num_classes": 3, "split": exact}, {**sun, "order": 2, "num_classes": 4}]
    manifest = parse_manifest({**doc, "name": "imported", "tasks": tasks})
    report = prepare_stream(
        manifest, LocalObjectStore(tmp_path / "store"), image_size=8, offline_dir=offline, accept_count_change=True
    )  # fixtures: far fewer classes than pinned
    counts = {item.dataset: item.counts for item in report.datasets}
    assert counts["nevis:coil20"] == {"train": 5, "dev": 2, "dev_test": 2, "test": 3}
    assert sum(counts["nevis:sun_attributes"].values()) == 6
