"""Where every object the service writes lives in the object store: the one key layout.

Each family of objects (a dataset's shards, a trial's checkpoints, a probe job's features, ...)
sits under one of the :data:`ROOTS` and has its key built here and nowhere else: writers call
these builders, readers and the garbage collection (:mod:`services.store.key_families`, which
adds what keeps each family alive) derive keys from them. A new kind of object gets its
builder here first, so the collection can never meet a key it was not taught.

Pure string functions: nothing here reads the database or the store.
"""

from __future__ import annotations

DATASETS = "datasets"
"""Prepared datasets: shards, indexes and the train order's staging parts."""
RUNS = "runs"
"""A submission's run: each task attempt's trials, predictions, logs, kept intervals."""
PRETRAINED = "pretrained"
"""Uploaded pretrained checkpoints, by digest."""
BUNDLES = "learners/bundles"
"""Uploaded learner bundles, by digest."""
PROBE_FEATURES = "probe-features"
"""A checkpoint probe job's features, read by its trial job."""
ROOTS: tuple[str, ...] = (DATASETS, RUNS, PRETRAINED, BUNDLES, PROBE_FEATURES)
"""Every prefix the service writes under; nothing outside them is the service's."""

PREDICTOR_FILE = "predictor.bin"
STATE_FILE = "state.pkl"
LOG_FILE = "log.txt"
"""A trial's log (its learner host's output and failures, bounded) under the trial's prefix."""
PREDICT_LOG_FILE = "predict-log.txt"
"""The log of an attempt's prediction job (scoring the chosen predictor) under the attempt's prefix."""
PREPARE_LOG_FILE = "prepare-log.txt"
"""The log of an attempt's ``prepare_task`` (its host's output and failure) under the attempt's prefix."""
PREDICTIONS_FILE = "predictions.npz"
TRANSFER_FILE = "transfer-record.json"
"""A committed attempt's transfer record: the choices read from its learner state once, at commit, bounded."""
INDEX_FILE = "index.json"


# -- datasets ------------------------------------------------------------------------------


def dataset_prefix(source: str, name: str, image_size: int) -> str:
    """``datasets/<source>/<name>/<S>px``: the folder of one prepared dataset."""
    return f"{DATASETS}/{source}/{name}/{image_size}px"


def index_key(prefix: str) -> str:
    """A prepared dataset's index (written last: its presence means the dataset is complete)."""
    return f"{prefix}/{INDEX_FILE}"


def shard_key(prefix: str, split: str, number: int) -> str:
    """One shard of one split of a prepared dataset."""
    return f"{prefix}/{split}-{number:05d}.npz"


def stage_key(prefix: str, bucket: int, part: int) -> str:
    """A part of the train order's bucket, set aside while a dataset is written (deleted after)."""
    return f"{prefix}/stage/train-{bucket:05d}-{part:05d}.npz"


# -- uploads -------------------------------------------------------------------------------


def bundle_key(digest: str, filename: str) -> str:
    """An uploaded learner bundle, under its bytes' sha256 (its file name kept for its kind)."""
    return f"{BUNDLES}/{digest}/{filename}"


def pretrained_key(digest: str) -> str:
    """An uploaded pretrained checkpoint, under its bytes' sha256 (the same file stored once)."""
    return f"{PRETRAINED}/{digest}.bin"


# -- runs ----------------------------------------------------------------------------------


def submission_prefix(submission_id: int) -> str:
    """The prefix of every object one submission's run writes."""
    return f"{RUNS}/{submission_id}"


def attempt_prefix(submission_id: int, order: int, attempt: int) -> str:
    """The prefix of every object one attempt at one task writes."""
    return f"{submission_prefix(submission_id)}/task-{order:03d}/attempt-{attempt}"


def trial_prefix(attempt_key_prefix: str, trial_index: int) -> str:
    """The prefix of one trial's objects inside its attempt."""
    return f"{attempt_key_prefix}/trial-{trial_index:03d}"


def checkpoint_key(trial: str, step: int) -> str:
    """A checkpoint a trial saved at ``step`` (``trial``: the trial's prefix)."""
    return f"{trial}/ckpt-{step:07d}.bin"


def trial_predictor_key(trial: str) -> str:
    """The predictor a trial saved (``trial``: the trial's prefix)."""
    return f"{trial}/{PREDICTOR_FILE}"


def trial_state_key(trial: str) -> str:
    """The learner state a trial left (``trial``: the trial's prefix)."""
    return f"{trial}/{STATE_FILE}"


def trial_log_key(trial: str, *, rank: int = 0) -> str:
    """A trial's log; a multi-worker trial's other ranks each keep their own beside it."""
    return f"{trial}/{LOG_FILE}" if rank == 0 else f"{trial}/log-rank-{rank}.txt"


def predictor_key(submission_id: int, order: int, attempt: int, trial_index: int) -> str:
    """The key of the predictor a trial saved, from the rows that name it."""
    return trial_predictor_key(trial_prefix(attempt_prefix(submission_id, order, attempt), trial_index))


def predict_log_key(attempt: str) -> str:
    """The log of an attempt's prediction job (``attempt``: the attempt's prefix)."""
    return f"{attempt}/{PREDICT_LOG_FILE}"


def prepare_log_key(attempt: str) -> str:
    """The log of an attempt's ``prepare_task`` (``attempt``: the attempt's prefix)."""
    return f"{attempt}/{PREPARE_LOG_FILE}"


def predictions_key(submission_id: int, order: int, attempt: int) -> str:
    """The test predictions of one task attempt's chosen predictor (for the uncertainty views)."""
    return f"{attempt_prefix(submission_id, order, attempt)}/{PREDICTIONS_FILE}"


def transfer_record_key(submission_id: int, order: int, attempt: int) -> str:
    """The transfer record kept when an attempt commits (:mod:`services.store.runs.transfer_record`)."""
    return f"{attempt_prefix(submission_id, order, attempt)}/{TRANSFER_FILE}"


def interval_key(submission_id: int, digest: str) -> str:
    """A kept interval of a submission's E, named by the digest of what it was computed over."""
    return f"{submission_prefix(submission_id)}/uncertainty/e-interval-{digest}.json"


# -- the probe pool ------------------------------------------------------------------------


def features_key(settings_hash: str, checkpoint_id: int) -> str:
    """Where a checkpoint's probe features live: written by its checkpoint job, read by its
    trial job."""
    return f"{PROBE_FEATURES}/{settings_hash}/{checkpoint_id}.npz"


__all__ = [
    "BUNDLES",
    "DATASETS",
    "INDEX_FILE",
    "LOG_FILE",
    "PREDICTIONS_FILE",
    "PREDICTOR_FILE",
    "PREDICT_LOG_FILE",
    "PREPARE_LOG_FILE",
    "PRETRAINED",
    "PROBE_FEATURES",
    "ROOTS",
    "RUNS",
    "STATE_FILE",
    "TRANSFER_FILE",
    "attempt_prefix",
    "bundle_key",
    "checkpoint_key",
    "dataset_prefix",
    "features_key",
    "index_key",
    "interval_key",
    "predict_log_key",
    "predictions_key",
    "prepare_log_key",
    "predictor_key",
    "pretrained_key",
    "shard_key",
    "stage_key",
    "submission_prefix",
    "trial_log_key",
    "trial_predictor_key",
    "trial_prefix",
    "trial_state_key",
    "transfer_record_key",
]
