"""Fixture for MNIST-M: mnist_m.tar.gz with train/test PNG folders and the two label lists
(written after the images, so the reader cannot rely on finding the lists first)."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar

TRAIN = {"00000000.png": 5, "00000001.png": 0, "00000002.png": 4}
TEST = {"00000000.png": 7, "00000009.png": 2}


def write_mnist_m(data_dir: Path, more: int = 0) -> dict[str, int]:
    """Returns the label each image name should get (test overrides train, as in the reference);
    ``more`` adds that many train images (labels 0..9 in turn)."""
    members = {}
    train = {**TRAIN, **{f"{100 + i:08d}.png": i % 10 for i in range(more)}}
    for part, labels in (("train", train), ("test", TEST)):
        for i, name in enumerate(labels):
            members[f"mnist_m/mnist_m_{part}/{name}"] = encoded(len(members) + i, "PNG", 7, 7)
    members["mnist_m/mnist_m_train/unlisted.png"] = encoded(99, "PNG", 7, 7)
    for part, labels in (("train", train), ("test", TEST)):
        members[f"mnist_m/mnist_m_{part}_labels.txt"] = "".join(
            f"{name} {label}\n" for name, label in labels.items()
        ).encode()
    write_tar(source_dir(data_dir, "mnist_m") / "mnist_m.tar.gz", members)
    return {**train, **TEST}


__all__ = ["TEST", "TRAIN", "write_mnist_m"]
