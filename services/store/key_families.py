"""Every family of objects the service writes: its layout, its writer and what keeps it alive.

The builders are :mod:`services.store.key_layout`'s; this table adds, per family, the rows
that reference its keys, so the garbage collection (:mod:`services.store.garbage`) walks
:data:`FAMILIES` instead of a copy of its own. A key is *referenced* when a family's
``references`` yields it, or when the key its ``kept_with`` names is referenced (a rank's log
lives as long as its trial's). A key under the attempt prefix of a task still pending or
running is kept by the collection whatever its family: its trials write long before the
task's commit records them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

from services.store import key_layout as kl
from services.store.db.models import Checkpoint, Dataset, Learner, Shard, Submission, TaskRun
from services.store.db.models_probe import ProbeJob
from services.store.runs.interval_cache import kept_interval_keys
from services.store.runs.logs import log_keys
from services.store.runs.predictions import committed_predictions_keys
from services.store.runs.run_keys import kept_predictor_keys

References = Callable[[Session], Iterable[str]]


@dataclass(frozen=True)
class KeyFamily:
    """One kind of object: where it lives, who writes it, and which rows keep it."""

    name: str
    root: str  # one of key_layout.ROOTS: the prefix the collection lists
    pattern: str  # a regular expression every key of the family matches in full
    writer: str  # the module that writes it
    kept_by: str  # in words: what references it
    references: References | None = None  # the keys the database keeps; None: kept by no row
    kept_with: Callable[[str], str] | None = None  # the key whose life this key shares
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.root not in kl.ROOTS or not self.pattern.startswith(re.escape(self.root) + "/"):
            raise ValueError(
                f"The key family {self.name!r} must lie under one of {kl.ROOTS}; "
                f"got root {self.root!r} and pattern {self.pattern!r}."
            )
        object.__setattr__(self, "_compiled", re.compile(self.pattern))

    def matches(self, key: str) -> bool:
        return self._compiled.fullmatch(key) is not None


def column_keys(column: InstrumentedAttribute[str | None]) -> References:
    """The keys one column holds."""

    def keys(session: Session) -> Iterable[str]:
        return session.scalars(select(column).where(column.is_not(None)).distinct())

    keys.__qualname__ = f"column_keys({column})"
    return keys


def features_keys(session: Session) -> Iterable[str]:
    """The features of each checkpoint probe job (its trial job reads them)."""
    rows = session.execute(
        select(ProbeJob.settings_hash, ProbeJob.checkpoint_id).where(
            ProbeJob.kind == "checkpoint", ProbeJob.checkpoint_id.is_not(None)
        )
    )
    return (kl.features_key(settings_hash, checkpoint) for settings_hash, checkpoint in rows)


def _trial_log_beside(key: str) -> str:
    """A rank's log's trial log (``.../trial-000/log-rank-2.txt`` → ``.../trial-000/log.txt``)."""
    return kl.trial_log_key(key.rsplit("/", 1)[0])


def _predictions_beside(key: str) -> str:
    """A committed attempt's transfer record lives as long as its predictions (``.../attempt-1/transfer-record.json``
    → ``.../attempt-1/predictions.npz``)."""
    return f"{key.rsplit('/', 1)[0]}/{kl.PREDICTIONS_FILE}"


_DATASET = re.escape(kl.DATASETS) + r"/[^/]+/[^/]+/\d+px"
_ATTEMPT = re.escape(kl.RUNS) + r"/\d+/task-\d{3,}/attempt-\d+"
_TRIAL = _ATTEMPT + r"/trial-\d{3,}"
_SHA = "[0-9a-f]{64}"

FAMILIES: tuple[KeyFamily, ...] = (
    KeyFamily(
        "dataset index",
        kl.DATASETS,
        _DATASET + "/" + re.escape(kl.INDEX_FILE),
        "workers/stream/shards.py",
        "datasets.index_key",
        column_keys(Dataset.index_key),
    ),
    KeyFamily(
        "dataset shard",
        kl.DATASETS,
        _DATASET + r"/[a-z_]+-\d{5}\.npz",
        "workers/stream/shards.py",
        "shards.object_key",
        column_keys(Shard.object_key),
    ),
    KeyFamily(
        "train-order stage",
        kl.DATASETS,
        _DATASET + r"/stage/train-\d{5}-\d{5}\.npz",
        "workers/stream/train_order.py",
        "nothing: its writer deletes it; a crashed prepare's parts are orphans once old",
    ),
    KeyFamily(
        "learner bundle",
        kl.BUNDLES,
        re.escape(kl.BUNDLES) + f"/{_SHA}/[^/]+",
        "services/coordinator/api/routes/learners.py",
        "learners.bundle_key",
        column_keys(Learner.bundle_key),
    ),
    KeyFamily(
        "pretrained checkpoint",
        kl.PRETRAINED,
        re.escape(kl.PRETRAINED) + rf"/{_SHA}\.bin",
        "workers/trainer/pretrained_key.py",
        "submissions.pretrained_key",
        column_keys(Submission.pretrained_key),
    ),
    KeyFamily(
        "checkpoint",
        kl.RUNS,
        _TRIAL + r"/ckpt-\d{7,}\.bin",
        "workers/trainer/trial.py",
        "checkpoints.object_key",
        column_keys(Checkpoint.object_key),
    ),
    KeyFamily(
        "predictor",
        kl.RUNS,
        _TRIAL + "/" + re.escape(kl.PREDICTOR_FILE),
        "workers/trainer/trial.py",
        "the best trial of a committed task (task_results.best_trial_id)",
        kept_predictor_keys,
    ),
    KeyFamily(
        "learner state",
        kl.RUNS,
        _TRIAL + "/" + re.escape(kl.STATE_FILE),
        "workers/trainer/trial.py",
        "task_runs.learner_state_key",
        column_keys(TaskRun.learner_state_key),
    ),
    KeyFamily(
        "trial log",
        kl.RUNS,
        _TRIAL + "/" + re.escape(kl.LOG_FILE),
        "workers/trainer/trial.py",
        "its trial's row",
        log_keys,
    ),
    KeyFamily(
        "rank log",
        kl.RUNS,
        _TRIAL + r"/log-rank-\d+\.txt",
        "workers/trainer/rank_trial.py",
        "its trial's log",
        kept_with=_trial_log_beside,
    ),
    KeyFamily(
        "prediction log",
        kl.RUNS,
        _ATTEMPT + "/" + re.escape(kl.PREDICT_LOG_FILE),
        "workers/trainer/stream_runner.py",
        "its attempt's row",
        log_keys,
    ),
    KeyFamily(
        "preparation log",
        kl.RUNS,
        _ATTEMPT + "/" + re.escape(kl.PREPARE_LOG_FILE),
        "workers/trainer/task_prepare.py",
        "its attempt's row",
        log_keys,
    ),
    KeyFamily(
        "predictions",
        kl.RUNS,
        _ATTEMPT + "/" + re.escape(kl.PREDICTIONS_FILE),
        "workers/trainer/stream_runner.py",
        "a committed task's attempt (task_results)",
        committed_predictions_keys,
    ),
    KeyFamily(
        "transfer record",
        kl.RUNS,
        _ATTEMPT + "/" + re.escape(kl.TRANSFER_FILE),
        "services/store/runs/transfer_record.py",
        "its attempt's predictions (a committed task's attempt)",
        kept_with=_predictions_beside,
    ),
    KeyFamily(
        "kept interval",
        kl.RUNS,
        re.escape(kl.RUNS) + r"/\d+/uncertainty/e-interval-[0-9a-f]+\.json",
        "services/store/runs/interval_cache.py",
        "the submission's current committed attempts",
        kept_interval_keys,
    ),
    KeyFamily(
        "probe features",
        kl.PROBE_FEATURES,
        re.escape(kl.PROBE_FEATURES) + r"/[^/]+/\d+\.npz",
        "workers/probe/runtime/trial_fits.py",
        "a checkpoint probe job (probe_jobs)",
        features_keys,
    ),
)
"""Every family of keys the service writes."""

COLLECTED_PREFIXES: tuple[str, ...] = tuple(root for root in kl.ROOTS if any(f.root == root for f in FAMILIES))
"""The roots the collection lists, in layout order; nothing outside them is ever looked at."""


def family_of(key: str) -> KeyFamily | None:
    """The family ``key`` belongs to; None for a key no family declares."""
    return next((f for f in FAMILIES if f.matches(key)), None)


def referenced_keys(session: Session) -> set[str]:
    """Every key the database references, walking each family's references once."""
    keys: set[str] = set()
    for references in dict.fromkeys(f.references for f in FAMILIES if f.references is not None):
        keys.update(references(session))
    return keys


def is_referenced(key: str, referenced: set[str]) -> bool:
    """Whether ``key`` is referenced, directly or through the key its family shares a life with."""
    if key in referenced:
        return True
    family = family_of(key)
    return family is not None and family.kept_with is not None and family.kept_with(key) in referenced


__all__ = [
    "COLLECTED_PREFIXES",
    "FAMILIES",
    "KeyFamily",
    "column_keys",
    "family_of",
    "features_keys",
    "is_referenced",
    "referenced_keys",
]
