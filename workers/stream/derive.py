"""Stream variants for the ordering ablation: the same tasks, shuffled, as a new manifest.

The NEVIS'22 paper asks whether the chronological order of the stream matters by running
learners on shuffled streams. :func:`derive_manifest` builds such a stream from a parent
manifest, deterministically from a seed, as a manifest of its own (a new name and version, and
a ``derived_from`` record of the parent's name, version and sha256, the mode and the seed), so
it is registered, run and compared like any other stream version.

What stays fixed, and why:

- Each task keeps its ``year`` (the year of its dataset, a fact) and therefore its phase,
  which follows from the year. The meta-test set is the same set of tasks in every mode:
  scores on a shuffled stream stay comparable with scores on the parent.
- ``order`` is the position in the new stream, renumbered 1..n (the format's convention); the
  protocol is causal by order, so this is what the shuffle changes.

Modes (:data:`SHUFFLE_MODES`):

- ``within-years``: tasks are shuffled among the positions of their own year; every position
  keeps its year, so the year sequence is the parent's.
- ``all``: tasks are shuffled across the whole meta-train phase and, separately, across the
  whole meta-test phase; the meta-train tasks still come first, but years may go back within
  a phase (the format allows that only in a derived manifest).

The permutation sorts each group by ``sha256(seed, original order)``: it depends on nothing
but the seed and the parent, on any Python version, so the same seed gives byte-identical
output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace

from services.core.errors import ConfigError, UnknownNameError, unknown_name_message
from workers.stream.manifest import SHUFFLE_MODES, Derivation, StreamManifest, TaskSpec
from workers.stream.manifest_files import manifest_sha256

SEED_RANGE = (0, 2**32 - 1)  # the same bounds as a split rule's seed

_GROUP_OF: dict[str, Callable[[TaskSpec], Hashable]] = {
    "within-years": lambda task: task.year,
    "all": lambda task: task.phase,
}
_MODE_TEXT = {
    "within-years": "within each year",
    "all": "across the whole meta-train phase and, separately, the whole meta-test phase",
}


def derive_manifest(manifest: StreamManifest, *, mode: str, seed: int) -> StreamManifest:
    """A new manifest with ``manifest``'s tasks shuffled by ``mode`` from ``seed``.

    Args:
        manifest: the parent stream.
        mode: ``"within-years"`` (shuffle among tasks of the same year) or ``"all"`` (shuffle
            within meta-train and within meta-test, so the meta-test split is unchanged).
        seed: an int in :data:`SEED_RANGE`; the same seed gives the same manifest.

    Returns:
        The derived manifest: named ``<parent>-shuffled-<mode>-s<seed>``, versioned
        ``<parent version>+<mode>.s<seed>``, tasks renumbered 1..n, each with its own year and
        phase, and ``derived_from`` naming the parent.

    Raises:
        UnknownNameError: ``mode`` is not one of :data:`SHUFFLE_MODES`.
        ConfigError: ``seed`` is not an int in :data:`SEED_RANGE`.
    """
    check_mode(mode)
    check_seed(seed)
    shuffled = _permute_within_groups(manifest.tasks, _GROUP_OF[mode], seed)
    tasks = tuple(replace(task, order=position) for position, task in enumerate(shuffled, 1))
    return replace(
        manifest,
        name=f"{manifest.name}-shuffled-{mode}-s{seed}",
        version=f"{manifest.version}+{mode}.s{seed}",
        description=(
            f"{manifest.description} Ordering ablation: the tasks of {manifest.name} "
            f"{manifest.version}, shuffled {_MODE_TEXT[mode]} with seed {seed}."
        ),
        tasks=tasks,
        derived_from=Derivation(
            name=manifest.name, version=manifest.version, sha256=manifest_sha256(manifest), mode=mode, seed=seed
        ),
    )


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`SHUFFLE_MODES`; otherwise an error listing them."""
    if mode not in SHUFFLE_MODES:
        message = unknown_name_message("shuffle mode", mode, SHUFFLE_MODES)
        raise UnknownNameError(message, field="mode")
    return mode


def check_seed(seed: int) -> int:
    """``seed`` if it is an int in :data:`SEED_RANGE`; otherwise an error saying so."""
    lo, hi = SEED_RANGE
    if isinstance(seed, bool) or not isinstance(seed, int) or not lo <= seed <= hi:
        raise ConfigError(f"The shuffle seed must be an int in [{lo}, {hi}]. Got {seed!r} instead.", field="seed")
    return seed


def _permute_within_groups(
    tasks: Sequence[TaskSpec], group_of: Callable[[TaskSpec], Hashable], seed: int
) -> list[TaskSpec]:
    """Shuffle tasks among the positions whose task is in the same group; positions keep
    their group, so a year (or phase) sequence is unchanged."""
    positions: dict[Hashable, list[int]] = {}
    for index, task in enumerate(tasks):
        positions.setdefault(group_of(task), []).append(index)
    out = list(tasks)
    for indices in positions.values():
        members = sorted((tasks[i] for i in indices), key=lambda t: _shuffle_key(seed, t))
        for index, task in zip(indices, members, strict=True):
            out[index] = task
    return out


def _shuffle_key(seed: int, task: TaskSpec) -> bytes:
    return hashlib.sha256(f"nevis-shuffle:{seed}:{task.order}".encode()).digest()


__all__ = ["SEED_RANGE", "SHUFFLE_MODES", "check_mode", "check_seed", "derive_manifest"]
