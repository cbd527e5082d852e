"""Fixtures for the table sources: semeion.data, Landsat's sat.trn / sat.tst, and the
HMNIST CSV inside colorectal-histology-mnist.zip."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.source_fixtures.tiny import source_dir, write_zip


def write_semeion(data_dir: Path) -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(0)
    rows = [(rng.integers(0, 2, 256), label) for label in (0, 9, 4, 4, 4, 4, 4, 4, 4, 4)]
    text = "".join(
        " ".join(f"{v:.4f}" for v in bits) + " " + " ".join("1" if i == label else "0" for i in range(10)) + " \n"
        for bits, label in rows
    )
    (source_dir(data_dir, "semeion") / "semeion.data").write_text(text)
    return rows


def write_landsat(data_dir: Path) -> dict[str, list[tuple[np.ndarray, int]]]:
    rng = np.random.default_rng(1)
    parts = {"sat.trn": [1, 7, 2, 3, 4, 5, 1, 1, 1, 1], "sat.tst": [5, 3]}
    out = {}
    for name, codes in parts.items():
        rows = [(rng.integers(0, 256, 36), code) for code in codes]
        text = "".join(" ".join(str(v) for v in values) + f" {code}\n" for values, code in rows)
        (source_dir(data_dir, "landsat") / name).write_text(text)
        out[name] = rows
    return out


def write_path_mnist(data_dir: Path) -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(2)
    rows = [(rng.integers(0, 256, 28 * 28 * 3), label) for label in (1, 8, 3, 3, 3, 3, 3, 3, 3, 3)]
    header = ",".join(f"pixel{i:04d}" for i in range(28 * 28 * 3)) + ",label\n"
    body = "".join(",".join(str(v) for v in values) + f",{label}\n" for values, label in rows)
    write_zip(
        source_dir(data_dir, "path_mnist") / "colorectal-histology-mnist.zip",
        {"hmnist_8_8_L.csv": b"pixel0000,label\n1,1\n", "hmnist_28_28_RGB.csv": (header + body).encode()},
    )
    return rows


__all__ = ["write_landsat", "write_path_mnist", "write_semeion"]
