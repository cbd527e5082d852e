"""The Parquet image dataset format: what the writer keeps, what the ``parquet`` adapter reads
back (labels, multi-hot labels, class names, attributes, the source's splits, every encoding),
row groups, and the errors that name what is wrong."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from services.core.errors import DataIntegrityError, DatasetFormatError, DatasetNotFoundError
from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset
from workers.stream.adapters import AdapterContext, find_dataset, load_dataset


def _encoded(pixels: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def _pixels(height: int, width: int, channels: int, seed: int) -> np.ndarray:
    shape = (height, width) if channels == 1 else (height, width, 3)
    return np.random.RandomState(seed).randint(0, 256, size=shape, dtype=np.uint8)


def test_every_encoding_reads_back_at_its_own_size(tmp_path):
    grey, rgb, png, jpeg = (_pixels(5, 9, 1, 0), _pixels(7, 3, 3, 1), _pixels(4, 6, 3, 2), _pixels(16, 8, 3, 3))
    jpeg_bytes = _encoded(jpeg, "JPEG")
    rows = [
        ImageRow(grey, 0),
        ImageRow(rgb, 1),
        ImageRow(_encoded(png, "PNG"), 2),
        ImageRow(jpeg_bytes, 0),
        ImageRow(png, 1),
    ]
    written = write_parquet_dataset(
        rows, tmp_path / "mix.parquet", class_names=("x", "y", "z"), row_group_rows=2, encode_pixels=None
    )
    assert (written.num_rows, written.num_row_groups) == (5, 3)
    assert pq.ParquetFile(written.path).num_row_groups == 3
    raw = load_dataset("parquet:mix", AdapterContext(offline_dir=tmp_path))
    assert raw.images.shapes.tolist() == [[5, 9], [7, 3], [4, 6], [16, 8], [4, 6]]
    assert raw.labels.tolist() == [0, 1, 2, 0, 1] and raw.labels.dtype == np.int64
    assert raw.class_names == ("x", "y", "z") and raw.kind == "single"
    assert np.array_equal(raw.images[0], grey[..., None])  # grey stays one channel
    assert np.array_equal(raw.images[1], rgb) and np.array_equal(raw.images[2], png)
    decoded = np.asarray(Image.open(io.BytesIO(jpeg_bytes)).convert("RGB"))
    assert np.array_equal(raw.images[3], decoded)  # JPEG bytes kept as they came
    assert np.array_equal(raw.images[4], png) and np.array_equal(raw.images[0], grey[..., None])
    assert raw.given_splits is None and raw.attributes == {} and len(raw.source_checksum) == 64


def test_multi_hot_labels_attributes_and_the_sources_split(tmp_path):
    rows = [
        ImageRow(
            _pixels(3 + k, 4, 3, k),
            [k % 3, 3] if k % 2 else [],
            split=None,
            attributes={"subject": f"s{k // 2}", "angle_bin": k * 5},
        )
        for k in range(6)
    ]
    write_parquet_dataset(
        iter(rows),
        tmp_path / "multi.parquet",
        class_names=("a", "b", "c", "d"),
        kind="multi",
        splits={"train": [0, 1, 2], "val": [3], "test": [4, 5]},
        official_split=True,
        attributes={"domain": [1, 1, 2, 2, 3, 3]},
        source={"title": "Multi", "year": 2020},
        encode_pixels="PNG",
    )
    raw = load_dataset("parquet:multi", AdapterContext(offline_dir=tmp_path))
    assert raw.kind == "multi" and raw.labels.dtype == np.uint8
    assert raw.labels.tolist() == [[0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 1]]
    assert raw.attributes["subject"].tolist() == ["s0", "s0", "s1", "s1", "s2", "s2"]
    assert raw.attributes["angle_bin"].tolist() == [0, 5, 10, 15, 20, 25]
    assert raw.attributes["domain"].dtype == np.int64
    given = raw.given_splits
    assert given.train.tolist() == [0, 1, 2] and given.val.tolist() == [3]
    assert given.test.tolist() == [4, 5] and given.official
    assert raw.metadata["title"] == "Multi" and raw.metadata["file"] == "multi.parquet"
    assert np.array_equal(raw.images[5], _pixels(8, 4, 3, 5))  # PNG-encoded pixels, lossless


def test_a_rows_own_split_wins_and_unsplit_rows_are_left_out(tmp_path):
    rows = [ImageRow(_pixels(2, 2, 1, k), 0, split="test" if k == 0 else None) for k in range(4)]
    write_parquet_dataset(rows, tmp_path / "s.parquet", class_names=("a",), splits={"train": [0, 1, 2]})
    given = load_dataset("parquet:s", AdapterContext(offline_dir=tmp_path)).given_splits
    assert given.train.tolist() == [1, 2] and given.test.tolist() == [0] and given.val is None
    assert not given.official


def test_nevis_names_find_a_parquet_dataset_before_an_npz(tmp_path):
    write_parquet_dataset([ImageRow(_pixels(3, 5, 3, 0), 0)], tmp_path / "venus.parquet", class_names=("v",))
    raw = load_dataset("nevis:venus", AdapterContext(offline_dir=tmp_path))
    assert raw.key == "nevis:venus" and raw.images.shapes.tolist() == [[3, 5]]
    assert find_dataset("parquet:venus", AdapterContext(offline_dir=tmp_path)) is None


def test_a_missing_dataset_says_how_to_provide_it(tmp_path):
    missing = find_dataset("parquet:absent", AdapterContext(offline_dir=tmp_path))
    assert "absent.parquet" in missing.message("absent")
    with pytest.raises(DatasetNotFoundError, match="docs/data-format.md"):
        load_dataset("parquet:absent", AdapterContext(offline_dir=tmp_path))


@pytest.mark.parametrize(
    ("rows", "kind", "match"),
    [
        ([ImageRow(np.zeros((2, 2), np.uint8), 2)], "single", r"row 0: label 2 .* 0\.\.1"),
        ([ImageRow(np.zeros((2, 2), np.uint8), [1, 1])], "multi", r"row 0: labels \[1, 1\]"),
        ([ImageRow(np.zeros((2, 2), np.uint8), 0, split="dev")], "single", "split 'dev'"),
        ([ImageRow(np.zeros((2, 2), np.float32), 0)], "single", "row 0: pixels must be uint8"),
        ([ImageRow(b"not an image", 0)], "single", "row 0"),
        (
            [
                ImageRow(np.zeros((2, 2), np.uint8), 0, attributes={"s": 1}),
                ImageRow(np.zeros((2, 2), np.uint8), 0, attributes={"s": "x"}),
            ],
            "single",
            "row 1: attribute 's'",
        ),
        (
            [ImageRow(np.zeros((2, 2), np.uint8), 0, attributes={"s": 1}), ImageRow(np.zeros((2, 2), np.uint8), 0)],
            "single",
            "row 1 has attributes",
        ),
        ([], "single", "no rows"),
    ],
)
def test_a_bad_row_names_itself_and_leaves_no_file(tmp_path, rows, kind, match):
    path = tmp_path / "bad.parquet"
    with pytest.raises(DatasetFormatError, match=match):
        write_parquet_dataset(rows, path, class_names=("a", "b"), kind=kind, row_group_rows=1)
    assert list(tmp_path.iterdir()) == []  # neither the file nor a partial one


def test_a_parquet_file_not_written_as_a_dataset_is_refused(tmp_path):
    pq.write_table(pa.table({"image": [b"x"], "label": [0]}), tmp_path / "other.parquet")
    with pytest.raises(DatasetFormatError, match="not written as a NEVIS image dataset"):
        load_dataset("parquet:other", AdapterContext(offline_dir=tmp_path))
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataIntegrityError, match="cannot read"):
        load_dataset("parquet:broken", AdapterContext(offline_dir=tmp_path))


def test_raw_pixels_that_do_not_match_their_extent_are_refused_when_read(tmp_path):
    path = tmp_path / "lie.parquet"
    write_parquet_dataset([ImageRow(np.zeros((2, 3), np.uint8), 0)], path, class_names=("a",))
    table = pq.read_table(path)
    lying = table.set_column(table.schema.get_field_index("height"), "height", pa.array([3], pa.int32()))
    pq.write_table(lying, path)
    raw = load_dataset("parquet:lie", AdapterContext(offline_dir=tmp_path))
    with pytest.raises(DatasetFormatError, match="row 0 holds 6 raw bytes"):
        raw.images[0]


def test_an_encoded_image_that_does_not_match_its_extent_is_refused_when_read(tmp_path):
    path = tmp_path / "lie.parquet"
    write_parquet_dataset([ImageRow(np.zeros((2, 3), np.uint8), 0)], path, class_names=("a",), encode_pixels="PNG")
    table = pq.read_table(path)
    lying = table.set_column(table.schema.get_field_index("width"), "width", pa.array([4], pa.int32()))
    pq.write_table(lying, path)
    raw = load_dataset("parquet:lie", AdapterContext(offline_dir=tmp_path))
    with pytest.raises(DatasetFormatError, match="decodes to 2x3 pixels.*2x4"):
        raw.images[0]


def test_sixteen_bit_grey_keeps_its_high_byte_instead_of_clipping(tmp_path):
    wide = np.array([[0, 255, 256, 32768, 65535]], dtype=np.uint16)
    write_parquet_dataset([ImageRow(_encoded(wide, "PNG"), 0)], tmp_path / "deep.parquet", class_names=("a",))
    raw = load_dataset("parquet:deep", AdapterContext(offline_dir=tmp_path))
    assert raw.images[0][..., 0].tolist() == [[0, 0, 1, 128, 255]]
