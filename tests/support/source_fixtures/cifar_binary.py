"""Fixtures for CIFAR-10 / CIFAR-100 binary tars: batches of records and the name files."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import pixels, source_dir, write_tar


def _records(labels: list[bytes], seed: int) -> bytes:
    out = b""
    for i, label in enumerate(labels):
        out += label + pixels(seed + i, 32, 32, 3).transpose(2, 0, 1).tobytes()
    return out


def write_cifar10(data_dir: Path, repeat: int = 1) -> dict[str, list[int]]:
    """cifar-10-binary.tar.gz with two train batches and the test batch (names file last);
    ``repeat`` repeats each batch's labels (with new pixels)."""
    parts = {"data_batch_1": [0, 1, 2] * repeat, "data_batch_2": [3, 9] * repeat, "test_batch": [4, 5] * repeat}
    members = {
        f"cifar-10-batches-bin/{name}.bin": _records([bytes([v]) for v in labels], 1000 * i)
        for i, (name, labels) in enumerate(parts.items())
    }
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    members["cifar-10-batches-bin/batches.meta.txt"] = ("\n".join(names) + "\n\n").encode()
    write_tar(source_dir(data_dir, "cifar10") / "cifar-10-binary.tar.gz", members)
    return parts


def write_cifar100(data_dir: Path, repeat: int = 1) -> dict[str, list[tuple[int, int]]]:
    """cifar-100-binary.tar.gz with train.bin and test.bin of (coarse, fine) records."""
    parts = {"train": [(0, 5), (1, 99), (19, 0)] * repeat, "test": [(3, 42)] * repeat}
    members = {
        "cifar-100-binary/coarse_label_names.txt": "\n".join(f"c{i}" for i in range(20)).encode(),
        "cifar-100-binary/fine_label_names.txt": "\n".join(f"f{i}" for i in range(100)).encode(),
    }
    for i, (name, labels) in enumerate(parts.items()):
        members[f"cifar-100-binary/{name}.bin"] = _records([bytes(pair) for pair in labels], 1000 * i)
    write_tar(source_dir(data_dir, "cifar100") / "cifar-100-binary.tar.gz", members)
    return parts


__all__ = ["write_cifar10", "write_cifar100"]
