"""The built-in stream ``nevis check`` runs a learner on: two procedural shapes tasks, made in
memory in well under a second, no data folder or download needed.

Task 1 is single-label (4 shapes), task 2 multi-label (which of 4 shapes appear): the two kinds
of task a learner meets, each small enough that a check takes seconds. The images are those of
the ``shapes:`` dataset adapter, at 16 pixels; the originals a learner may crop from are the
same images, each marked as full size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from workers.learners.protocol import LabelledData, TaskInfo
from workers.stream.adapters.shapes import generate_shapes
from workers.stream.task_info import Originals

IMAGE_SIZE = 16
NUM_TRAIN, NUM_DEV = 64, 32
VARIANTS = (("shape", "single"), ("multi", "multi"))


@dataclass(frozen=True)
class CheckTask:
    """One task of the check stream: what the learner may know, its train and dev splits."""

    info: TaskInfo
    train: LabelledData
    dev: LabelledData


@functools.cache
def check_stream() -> tuple[CheckTask, ...]:
    """The two tasks, in stream order."""
    tasks = []
    for order, (variant, kind) in enumerate(VARIANTS, start=1):
        data = generate_shapes(variant, num_examples=NUM_TRAIN + NUM_DEV, size=IMAGE_SIZE)
        images, labels = data.images, data.labels
        extents = np.full((NUM_TRAIN, 2), IMAGE_SIZE, dtype=np.int32)
        train = LabelledData(images[:NUM_TRAIN], labels[:NUM_TRAIN], Originals(images[:NUM_TRAIN], extents))
        dev = LabelledData(images[NUM_TRAIN:], labels[NUM_TRAIN:])
        info = TaskInfo(
            order=order,
            key=f"check-{order}",
            dataset=f"shapes:{variant}",
            title=f"nevis check: shapes, label = {variant}",
            year=2000 + order,
            domain="shape",
            kind=kind,
            num_classes=len(data.class_names),
            class_names=tuple(data.class_names),
            image_size=IMAGE_SIZE,
            num_train=NUM_TRAIN,
            num_dev=NUM_DEV,
        )
        tasks.append(CheckTask(info=info, train=train, dev=dev))
    return tuple(tasks)


__all__ = ["IMAGE_SIZE", "NUM_DEV", "NUM_TRAIN", "CheckTask", "check_stream"]
