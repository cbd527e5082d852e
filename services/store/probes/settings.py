"""What a probe run measures and how: one frozen value, stored with every result.

Contract: a :class:`ProbeSettings` is validated when built (bad values raise
:class:`ProbeSettingsError`, a ``ValueError``, in the project's one message shape); its
canonical JSON form (:meth:`ProbeSettings.to_dict`) and the short hash of that form
(:attr:`ProbeSettings.settings_hash`) identify it in the database, so results computed with
different settings never overwrite each other and the same settings always find their rows.

The dataclass's defaults are METRICS.md's (k = 5 folds, LiDAR with n = 1000 clean images and
q = 50 augmentations where the data allows, every trial): the :meth:`ProbeSettings.full`
preset. :meth:`ProbeSettings.standard`, what the service runs by default, probes every
checkpoint of each task's chosen trial and the first and last checkpoints of one other, on
the current task and the 3 most recent earlier ones, with LiDAR n = 150, q = 4 and smaller MLP probes, to bring probing a run's cost down to at most
that of training it; :meth:`ProbeSettings.publish` (the same values as ``full``) is the
papers' scale, the preset any published figure uses; :meth:`ProbeSettings.ci` is small
enough for a test run on two CPU cores. LiDAR's δ is relative to the features' scale by
default (``lidar_delta_mode``); settings stored before that field existed read back as
absolute, as they were computed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from services.core.errors import NevisError, UnknownNameError, unknown_name_message
from services.store.db.models_probe import PROBE_KIND_NAMES

# Declared once, with the probe tables' check constraint (a new kind needs a migration).
PROBE_KINDS: tuple[str, ...] = PROBE_KIND_NAMES
TARGET_MODES: tuple[str, ...] = ("earlier", "current")
PRESETS: tuple[str, ...] = ("standard", "ci", "full", "publish")
# The standard preset's earlier targets: the most recent ones only. Every earlier task makes a
# checkpoint's probing cost grow with the stream (O(T²) feature passes over a run, against
# training's O(T)); on offline (12 tasks) all of them cost 1.58x training, the 3 most recent
# leave it under 1x, and on FULL (106 tasks) no constant factor would.
STANDARD_MAX_EARLIER = 3
LIDAR_DELTA_MODES: tuple[str, ...] = ("relative", "absolute")
# What settings stored before a field existed meant by it (from_dict fills these in).
_LEGACY: dict[str, Any] = {"lidar_delta_mode": "absolute", "lidar_delta_sweep": (), "ofm_fresh_start": False}


class ProbeSettingsError(NevisError, ValueError):
    """A probe setting is out of range or unknown."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not NaN or infinite)."""
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _bad(name: str, what: str, got: Any) -> ProbeSettingsError:
    return ProbeSettingsError(f"The {name!r} parameter of ProbeSettings must be {what}. Got {got!r} instead.")


@dataclass(frozen=True)
class ProbeSettings:
    """Every knob of a probe run (all recorded with the results).

    Attributes:
        folds: k of the k-fold cross-validation of every probe (>= 2).
        kinds: Probe kinds to fit, from :data:`PROBE_KINDS` (linear, 2- and 3-layer MLP).
        targets: "earlier" probes the current task and the earlier tasks of the stream;
            "current" probes the current task only.
        max_earlier: At most this many earlier tasks (the most recent ones); None for all.
        other_trials: Besides each task's chosen trial (always probed, every checkpoint),
            probe this many of its other trials (the lowest trial indices); None for all.
        other_checkpoints: How many checkpoints of each of those other trials: the first
            and the last, then evenly spaced between (by step) for more; None for all. Two
            anchor the other trial's curve at both ends at a third of six checkpoints' cost.
        max_examples: Held-out images (dev and dev_test) per target task the probes use (a
            seeded subsample); the pretext error and loss use the current task's.
        lidar_n: Clean held-out images of the current task for LiDAR (some of the probe
            examples; capped by the data).
        lidar_q: Augmentations of each clean image (>= 2).
        lidar_delta: δ of LiDAR's within-class covariance (METRICS.md §3: 1e-4).
        lidar_delta_mode: "relative" (the ridge is δ times the mean eigenvalue of the
            within-class covariance, tr(Σ_w)/d, so LiDAR does not move with the features'
            scale) or "absolute" (δ itself; how results stored before the mode were made).
        lidar_delta_sweep: δ values (same mode) LiDAR is also computed at and stored with
            each checkpoint: its δ-sensitivity, which the report prints.
        lidar_eps: ε of LiDAR's entropy.
        rankme_eps: ε of RankMe's entropy.
        ofm_fresh_start: Measure OFM from a fresh network of the learner's architecture where
            a trial's first checkpoint is not untrained (a transfer learner's transferred
            network): Stuhr & Brauer's s_0. False: from the first checkpoint.
        patience: Convergence patience (measurements) on the pretext loss.
        min_delta: Convergence tolerance.
        linear_l2: L2 penalty of the linear probe (on standardised features).
        linear_max_iter: L-BFGS iterations of the linear probe.
        mlp_hidden: Hidden width of the MLP probes.
        mlp_steps: Full-batch Adam steps of the MLP probes.
        mlp_lr: Adam learning rate of the MLP probes.
        mlp_weight_decay: L2 penalty of the MLP probes.
        seed: Seed of subsampling, folds, augmentations and probe initialisation.
    """

    folds: int = 5
    kinds: tuple[str, ...] = PROBE_KINDS
    targets: str = "earlier"
    max_earlier: int | None = None
    other_trials: int | None = None
    other_checkpoints: int | None = None
    max_examples: int = 2000
    lidar_n: int = 1000
    lidar_q: int = 50
    lidar_delta: float = 1e-4
    lidar_delta_mode: str = "relative"
    lidar_delta_sweep: tuple[float, ...] = (1e-6, 1e-4, 1e-2)
    lidar_eps: float = 1e-8
    rankme_eps: float = 1e-7
    ofm_fresh_start: bool = True
    patience: int = 3
    min_delta: float = 0.0
    linear_l2: float = 1e-2
    linear_max_iter: int = 100
    mlp_hidden: int = 64
    mlp_steps: int = 150
    mlp_lr: float = 5e-3
    mlp_weight_decay: float = 1e-2
    seed: int = 0

    def __post_init__(self) -> None:
        self._check_names()
        self._check_ints()
        self._check_numbers()

    def _check_names(self) -> None:
        kinds = tuple(self.kinds)
        object.__setattr__(self, "kinds", kinds)
        if not kinds or len(set(kinds)) != len(kinds):
            raise _bad("kinds", f"a non-empty list of distinct names from {PROBE_KINDS}", kinds)
        for kind in kinds:
            if kind not in PROBE_KINDS:
                raise UnknownNameError(unknown_name_message("probe kind", kind, PROBE_KINDS))
        if self.lidar_delta_mode not in LIDAR_DELTA_MODES:
            raise UnknownNameError(unknown_name_message("LiDAR delta mode", self.lidar_delta_mode, LIDAR_DELTA_MODES))
        if self.targets not in TARGET_MODES:
            raise UnknownNameError(unknown_name_message("probe target mode", self.targets, TARGET_MODES))
        if not isinstance(self.ofm_fresh_start, bool):
            raise _bad("ofm_fresh_start", "a bool", self.ofm_fresh_start)

    def _check_ints(self) -> None:
        ints = {
            "folds": 2,
            "max_examples": 4,
            "lidar_n": 2,
            "lidar_q": 2,
            "patience": 1,
            "linear_max_iter": 1,
            "mlp_hidden": 1,
            "mlp_steps": 1,
            "seed": 0,
        }
        for name, low in ints.items():
            value = getattr(self, name)
            if not _is_int(value) or value < low:
                raise _bad(name, f"an int in [{low}, inf)", value)
        for name, low in (("max_earlier", 0), ("other_trials", 0), ("other_checkpoints", 1)):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < low):
                raise _bad(name, f"None or an int in [{low}, inf)", value)
        if self.max_examples < 2 * self.folds:
            raise _bad("max_examples", f"at least 2 * folds ({2 * self.folds})", self.max_examples)

    def _check_numbers(self) -> None:
        sweep = tuple(self.lidar_delta_sweep)
        if not all(_is_number(v) and v >= 0 for v in sweep):
            raise _bad("lidar_delta_sweep", "a list of finite numbers in [0, inf)", sweep)
        object.__setattr__(self, "lidar_delta_sweep", tuple(float(v) for v in sweep))
        positive = ("mlp_lr",)
        # δ = 0 is valid LiDAR when Σ_w is positive definite; lidar() refuses a singular one.
        non_negative = ("lidar_delta", "lidar_eps", "rankme_eps", "min_delta", "linear_l2", "mlp_weight_decay")
        for name in positive + non_negative:
            value = getattr(self, name)
            if not _is_number(value) or not (value > 0 if name in positive else value >= 0):
                interval = "(0, inf)" if name in positive else "[0, inf)"
                raise _bad(name, f"a finite number in {interval}", value)
            object.__setattr__(self, name, float(value))

    # --- presets ----------------------------------------------------------------------------

    @classmethod
    def standard(cls, **overrides: Any) -> ProbeSettings:
        """What the service runs: every checkpoint of each task's chosen trial and the first
        and last checkpoints of one other trial, the current task and the 3 most recent
        earlier ones as targets (:data:`STANDARD_MAX_EARLIER`), LiDAR with n = 150 held-out
        images (capped by the data) × q = 4 views (METRICS.md: "fewer is fine"; the values
        used are stored), MLP probes 32 wide trained 100 steps, k = 5: sized for probing to
        cost at most what training did (``bench/bench_probes.py`` measures the ratio: 0.88 on
        ``mini``, 0.81 on ``offline``)."""
        cheap = dict(
            other_trials=1,
            other_checkpoints=2,
            max_earlier=STANDARD_MAX_EARLIER,
            lidar_n=150,
            lidar_q=4,
            mlp_hidden=32,
            mlp_steps=100,
        )
        return cls(**{**cheap, **overrides})

    @classmethod
    def full(cls, **overrides: Any) -> ProbeSettings:
        """METRICS.md defaults on every trial: k = 5, LiDAR n = 1000 and q = 50 (capped by
        the data); several times the cost of training on small tasks."""
        return cls(**overrides)

    @classmethod
    def publish(cls, **overrides: Any) -> ProbeSettings:
        """The papers' scale, for any figure that is published: every checkpoint of every
        trial (so the headline correlation ranks every trial's final checkpoint), LiDAR with
        n = 1000 clean images × q = 50 views (METRICS.md §3, capped by the data) and δ
        relative to the features' scale, MLP probes 64 wide × 150 steps. The same values as
        :meth:`full`, named for what they are for."""
        return cls(**overrides)

    @classmethod
    def ci(cls, **overrides: Any) -> ProbeSettings:
        """A small configuration for tests and laptops: seconds per checkpoint."""
        small = dict(folds=3, max_examples=240, lidar_n=24, lidar_q=4, linear_max_iter=50, mlp_hidden=32, mlp_steps=60)
        return cls(**{**small, **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ProbeSettings:
        """The preset called ``name`` (:data:`PRESETS`), with ``overrides`` applied."""
        if name not in PRESETS:
            raise UnknownNameError(unknown_name_message("probe preset", name, PRESETS))
        return getattr(cls, name)(**overrides)

    # --- identity ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON-able form (lists for tuples)."""
        out = asdict(self)
        out["kinds"] = list(self.kinds)
        out["lidar_delta_sweep"] = list(self.lidar_delta_sweep)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeSettings:
        """Rebuild settings stored by :meth:`to_dict`; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProbeSettingsError(f"Unknown probe settings {unknown}; known settings: {sorted(known)}.")
        values = {**_LEGACY, **data}
        if "kinds" in values:
            values["kinds"] = tuple(values["kinds"])
        values["lidar_delta_sweep"] = tuple(values["lidar_delta_sweep"])
        return cls(**values)

    @property
    def settings_hash(self) -> str:
        """16 hex digits of the sha256 of the canonical JSON form."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def with_changes(self, **changes: Any) -> ProbeSettings:
        """A copy with some settings changed (validated again)."""
        return replace(self, **changes)


__all__ = [
    "LIDAR_DELTA_MODES",
    "PRESETS",
    "PROBE_KINDS",
    "STANDARD_MAX_EARLIER",
    "TARGET_MODES",
    "ProbeSettings",
    "ProbeSettingsError",
]
