"""Stream manifests: the ordered tasks of a stream version, as frozen values.

A manifest is a JSON document shipped in ``workers/stream/manifests/`` (see
:mod:`workers.stream.registry`). :func:`parse_manifest` is the only way in: it checks every
field and raises :class:`~services.core.errors.ManifestError` naming the stream, the task
and the field at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from services.core.errors import ManifestError

# Every dataset is cut into these four splits. Learners see train (and, for model
# selection, dev); evaluation uses dev_test in the meta-train phase and test in meta-test.
SPLITS: tuple[str, ...] = ("train", "dev", "dev_test", "test")

Phase = Literal["meta_train", "meta_test"]
TaskKind = Literal["single", "multi"]
SplitKind = Literal["random", "official_test", "provided"]
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class SplitRule:
    """How a dataset's examples are dealt into :data:`SPLITS`.

    - ``random``: a seeded, stratified draw over all examples with ``fractions`` over the
      four splits (summing to 1).
    - ``official_test``: the source's own test set is ``test``; its train set is drawn into
      train / dev / dev_test with ``fractions`` over those three (summing to 1).
    - ``provided``: the dataset ships explicit train / val / test index lists (the npz + JSON
      format); val is halved into dev and dev_test with ``seed``.
    """

    kind: SplitKind
    fractions: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    text: str = ""  # the rule as written in the source, for people


@dataclass(frozen=True)
class TaskSpec:
    """One task of a stream: a dataset at a point in time."""

    order: int  # 1-based position in the stream
    year: int
    dataset: str  # "<source>:<name>", e.g. "nevis:mnist", "offline:coil20", "sklearn:digits"
    title: str
    domain: str | None
    kind: TaskKind
    num_classes: int | None  # None where the source does not say
    split: SplitRule
    phase: Phase
    notes: str = ""

    @property
    def key(self) -> str:
        """Stable task identifier inside a stream, e.g. ``"007-offline-mnist"``."""
        return f"{self.order:03d}-{self.dataset.replace(':', '-')}"

    @property
    def source(self) -> str:
        return self.dataset.split(":", 1)[0]

    @property
    def dataset_name(self) -> str:
        return self.dataset.split(":", 1)[1]


@dataclass(frozen=True)
class StreamManifest:
    """A named, versioned, ordered list of tasks."""

    name: str
    version: str
    description: str
    source: str  # where the task list comes from (citation)
    meta_test_from_year: int  # tasks of this year and later form the meta-test phase
    tasks: tuple[TaskSpec, ...]
    image_size: int | None = None  # stored resolution override (default: settings)

    @property
    def meta_train(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.phase == "meta_train")

    @property
    def meta_test(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.phase == "meta_test")

    @property
    def datasets(self) -> tuple[str, ...]:
        """Distinct dataset keys, in order of first appearance."""
        return tuple(dict.fromkeys(t.dataset for t in self.tasks))


def parse_manifest(doc: Mapping[str, Any], *, origin: str = "<manifest>") -> StreamManifest:
    """Validate a manifest document and build the frozen value.

    Raises:
        ManifestError: naming ``origin``, the task order and the field at fault.
    """
    from workers.stream._manifest_checks import build_manifest  # noqa: PLC0415

    return build_manifest(doc, origin=origin)
