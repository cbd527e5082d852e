"""The one settings object, read from ``NEVIS_*`` environment variables.

Build it with :func:`get_settings` (cached, so tests can clear it with
``get_settings.cache_clear()``), never at import time. Defaults give an embedded laptop
set-up: SQLite and a local object store in the data folder, and a local Ray.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.errors import ConfigError

MIN_SALT_CHARS = 16
_SECRETS = frozenset({"split_salt"})
_CHOICES = {"sandbox": ("auto", "bwrap", "none"), "probe_preset": ("standard", "ci", "full", "publish", "off")}


def default_data_dir() -> Path:
    """Per-user data folder: ``$XDG_DATA_HOME/nevis`` or ``~/.local/share/nevis``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "nevis"


class Settings(BaseSettings):
    """Effective configuration of one process."""

    model_config = SettingsConfigDict(env_prefix="NEVIS_", extra="ignore", frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir, description="Local data folder.")
    database_url: str = Field(default="", description="SQLAlchemy URL; default SQLite in data_dir.")
    store_url: str = Field(default="", description="file:///path or s3://bucket/prefix.")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint.")
    ray_address: str | None = Field(default=None, description="Ray cluster; default local.")
    offline_data_dir: Path | None = Field(default=None, description="npz + JSON datasets.")
    data_mirror: str | None = Field(
        default=None,
        description="http(s):// or s3:// prefix `nevis data fetch` tries before each source's own "
        "URLs (layout <mirror>/<source key>/<file name>).",
    )
    source_catalogue: Path | None = Field(
        default=None,
        description="A source catalogue (JSON, the format of workers/stream/sources/catalogue.json) read "
        "instead of the packaged one, for a mirror whose files differ from the origins' "
        "(re-packed archives, or the test fixtures): fetched files are held to its checksums.",
    )
    image_size: int = Field(default=64, description="Task image resolution S (pixels).")
    stored_scale: float = Field(
        default=1.5,
        description="Long side of the stored originals (aspect ratio kept, training crops "
        "come from them) as a multiple of the task resolution: 1.5 stores 96 px "
        "at 64.",
    )
    stream_train_bytes: int = Field(
        default=8 << 30,
        ge=1,
        description="A task whose train split (images and originals) takes more bytes than "
        "this is offered to learners as a stream of shards (view.train_stream), "
        "which the built-in learners train from.",
    )
    probe_preset: str = Field(
        default="standard",
        description="Probe settings the probe pool queues committed tasks with: standard, ci, full, publish (the papers' scale), or off.",
    )

    learner_node_resource: str | None = Field(
        default=None,
        description="A custom Ray resource only learner nodes advertise (ray start --resources "
        "'{\"nevis_learner\": 1}'): every actor that starts learner hosts, and each trial's CPU "
        "reservation, asks for a share of it, so learner code never runs on the head, where the "
        "harness's credentials are. Unset: wherever Ray places it (one-node machines).",
    )

    sandbox: str = Field(
        default="auto",
        description="Where learner code runs: bwrap (bubblewrap sandbox), none (a plain "
        "subprocess with a clean environment), or auto (bwrap when installed).",
    )

    learner_paths: str = Field(
        default="",
        description="Folders (os.pathsep-separated) of operator-installed learner code that learner "
        "hosts see read-only; never on a harness's own import path. Default for local "
        "use outside production: the entries of PYTHONPATH.",
    )
    host_tmpfs_mb: int = Field(
        default=2048, ge=16, le=1 << 20, description="Size of each learner host's RAM-backed /tmp and /dev/shm (MiB)."
    )
    host_memory_mb: int = Field(
        default=0,
        ge=0,
        le=1 << 24,
        description="Memory cap of each learner host's control group (MiB); 0: none of its own.",
    )
    host_pids: int = Field(
        default=512,
        ge=0,
        le=1 << 22,
        description="Processes and threads a learner host may have (its control group); 0: no cap.",
    )
    host_declare_deadline_s: float = Field(
        default=120.0, gt=0, le=86400, description="Seconds a learner host may take to start and declare itself."
    )
    host_silence_deadline_s: float = Field(
        default=1800.0, gt=0, le=7 * 86400, description="Longest wait for any frame of a trial or prediction (s)."
    )
    log_ring_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=1 << 30,
        description="Bytes of a learner host's output (prints, tracebacks) kept per trial "
        "and per prediction job: the last ones (GET /v1/submissions/{id}/logs).",
    )
    host_predictor_mb: int = Field(
        default=1024,
        ge=1,
        le=1 << 22,
        description="Largest predictor (and checkpoint) a trial may hand back (MiB); "
        "a larger one is refused before its bytes are read.",
    )
    host_state_mb: int = Field(
        default=2048,
        ge=1,
        le=1 << 22,
        description="Largest learner state a trial may hand back (MiB); a larger one is "
        "refused before its bytes are read, and no larger one is ever read back.",
    )
    split_salt: str = Field(
        default="",
        description="The deployment's secret salt for every split draw (16+ characters; see "
        "docs/isolation.md): submitters cannot compute which images a drawn test split holds. "
        "Empty: the public, reproducible splits of the reference (under NEVIS_ENVIRONMENT="
        "production: the deployment's own, made once and kept in its database). Never shown.",
    )
    near_floor_band: float = Field(
        default=4.0,
        ge=1.0,
        le=64.0,
        description="A trial whose own FLOP count is at least its CPU-time floor but below this many "
        "times it is marked near-floor (docs/isolation.md): a count topped up to just over the floor.",
    )
    submission_storage_mb: int = Field(
        default=65536,
        ge=1,
        le=1 << 30,
        description="Bytes (MiB) of objects one submission's trials may store (checkpoints, predictors, "
        "states): a write over it fails the trial, naming this setting.",
    )
    proxy_max_dim: int = Field(
        default=2048,
        ge=2,
        le=1 << 16,
        description="Widest feature vector d a proxy-scheduler rung report may carry "
        "(n·q × d): LiDAR's harness-side cost grows as d³.",
    )

    @field_validator("sandbox", "probe_preset")
    @classmethod
    def _check_choice(cls, value: str, info: ValidationInfo) -> str:
        choices = _CHOICES[info.field_name]
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {value!r}")
        return value

    @field_validator("split_salt")
    @classmethod
    def _check_split_salt(cls, value: str) -> str:
        if value and len(value) < MIN_SALT_CHARS:  # a short salt is guessable from its digest
            raise ValueError(f"must be empty (public splits) or at least {MIN_SALT_CHARS} characters; got {len(value)}")
        return value

    @field_validator("image_size")
    @classmethod
    def _check_image_size(cls, value: int) -> int:
        if not 8 <= value <= 512:
            raise ValueError(f"must be an int in [8, 512]; got {value}")
        return value

    @field_validator("stored_scale")
    @classmethod
    def _check_stored_scale(cls, value: float) -> float:
        if not 1.0 <= value <= 4.0:
            raise ValueError(f"must be a number in [1, 4] (stored long side / image size); got {value}")
        return value

    @field_validator("data_dir", "offline_data_dir", "source_catalogue")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @model_validator(mode="after")
    def _fill_defaults(self) -> Settings:
        data_dir = self.data_dir.resolve()
        object.__setattr__(self, "data_dir", data_dir)
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite:///{data_dir / 'nevis.sqlite'}")
        if not self.store_url:
            object.__setattr__(self, "store_url", (data_dir / "store").as_uri())
        scheme = urlsplit(self.store_url).scheme
        if scheme not in ("file", "s3"):
            raise ValueError(f"NEVIS_STORE_URL must start with file:// or s3://; got {self.store_url!r}")
        if "://" not in self.database_url:
            raise ValueError(
                "NEVIS_DATABASE_URL must be an SQLAlchemy URL such as "
                f"postgresql+psycopg://user@host/db; got {self.database_url!r}"
            )
        return self

    def masked(self) -> dict[str, str | None]:
        """The settings as strings, with passwords in URLs replaced by ``***``."""
        out: dict[str, str | None] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            text = None if value is None else str(value)
            if text and "://" in text:
                text = mask_url(text)
            if name in _SECRETS and text:
                text = "***"  # a secret's value never appears in a listing
            out[f"NEVIS_{name.upper()}"] = text
        return out


def mask_url(url: str) -> str:
    """Hide the password of a URL, keeping everything else readable."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Read and validate the settings once per process.

    Raises:
        ConfigError: naming each bad variable and why.
    """
    return load_settings(Settings)


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def load_settings(cls: type[SettingsT]) -> SettingsT:
    """Build a settings class from the environment, turning validation errors into one
    :class:`ConfigError` that names each bad variable."""
    try:
        return cls()
    except ValidationError as exc:
        problems = "; ".join(_describe(err) for err in exc.errors())
        raise ConfigError(f"Invalid settings: {problems}") from None


def _describe(err: dict) -> str:
    """One validation problem as ``NEVIS_VAR: reason``."""
    message = str(err["msg"]).removeprefix("Value error, ")
    if not err["loc"]:
        return message
    return f"NEVIS_{'_'.join(str(p) for p in err['loc']).upper()}: {message}"


__all__ = ["Settings", "default_data_dir", "get_settings", "load_settings", "mask_url"]
