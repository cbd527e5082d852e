"""Benchmark refreshes (services/coordinator/refresh; docs/operators.md, "Benchmark refreshes"):
when they run, which baselines they re-run with which budget, on which streams, as whom (one group
of :class:`~services.coordinator.common.config.CoordinatorSettings`)."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field, field_validator

from services.coordinator.common.cron import CronSchedule, check_cron
from services.coordinator.common.validation import split_list
from services.core import rulesets
from services.core.budget import RunBudget
from services.core.errors import BudgetError, UnknownNameError

BUILTIN_LEARNER = re.compile(r"[a-z][a-z0-9_]{0,99}")
"""A built-in learner's registry name (a refresh baseline; no ``module:factory``)."""


def refresh_budget_of(value: str) -> RunBudget:
    """The baselines' refresh budget from NEVIS_REFRESH_BUDGET (empty: the default).

    Raises:
        ValueError: not a JSON object, or not a valid budget (naming the key).
    """
    if not value.strip():
        return RunBudget()
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be a JSON object of budget keys, e.g. '{{\"trials\": 2}}' ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object of budget keys, e.g. '{\"trials\": 2}'")  # noqa: TRY004 - pydantic reports ValueError
    try:
        return RunBudget(**doc)
    except BudgetError as exc:
        raise ValueError(f"is not a valid budget: {exc}") from None


class RefreshSettings(BaseModel):
    """The refresh knobs; the budget is checked against the search caps by the composed settings."""

    refresh_cron: str = Field(
        default="",
        max_length=200,
        description="When the scheduler starts due refreshes: a 5-field cron expression in UTC "
        "(e.g. '0 3 * * *') or a nickname such as '@daily'; empty: never (refresh with "
        "POST /v1/admin/refreshes, `nevis refresh run` or the chart's CronJob).",
    )
    refresh_baselines: str = Field(
        default="indep",
        max_length=2000,
        description="Comma-separated built-in learners a refresh re-runs on a new stream "
        "version, e.g. 'indep,ft_prev'; empty: none. The default is the paper's Indep (the "
        "ResNet-34, a GPU per trial where the cluster has one): a refresh exists for the paper's "
        "numbers. The '_small' names (e.g. 'indep_small') are fast learners for smoke runs and "
        "tests, not paper baselines; pt and pt_ft need a checkpoint and cannot be refreshed. "
        "'name@ruleset' runs it under that ruleset (docs/rules.md), e.g. "
        "'indep,indep@budget-1e15,indep@self-tuning': a row on each ruleset's board.",
    )
    refresh_budget: str = Field(
        default="",
        max_length=4000,
        description="The baselines' budget in refresh runs, as JSON (e.g. '{\"trials\": 2}'); "
        "empty: the default budget. Pinned submissions keep their own.",
    )
    refresh_streams: str = Field(
        default="",
        max_length=4000,
        description="Comma-separated streams that scheduled refreshes (and `nevis refresh run` "
        "without --stream) look at; empty: every stream that has a stored version here.",
    )
    refresh_owner: str = Field(
        default="refresh",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="The user that owns the baselines' refresh runs (made, role submitter, on first use).",
    )
    refresh_verify_seeds: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Verified rows (docs/rules.md): each scheduled refresh pass also replays this many times, "
        "with new seeds, up to NEVIS_REFRESH_VERIFY_LIMIT finished public meta-test submissions never verified "
        "(oldest first), owned by the refresh user; 0: only operators verify (POST /v1/submissions/{id}/verify).",
    )
    refresh_verify_limit: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Most submissions one scheduled refresh pass verifies (NEVIS_REFRESH_VERIFY_SEEDS replays each).",
    )

    @field_validator("refresh_cron")
    @classmethod
    def _check_refresh_cron(cls, value: str) -> str:
        return check_cron(value) if value.strip() else ""

    @field_validator("refresh_baselines")
    @classmethod
    def _check_refresh_baselines(cls, value: str) -> str:
        for entry in split_list(value):
            name, _, ruleset = entry.partition("@")
            if not BUILTIN_LEARNER.fullmatch(name):
                raise ValueError(
                    f"must list built-in learner names (lower case, digits, '_'), "
                    f"comma-separated, e.g. 'indep,ft_prev'. Got {name!r} instead."
                )
            if ruleset:
                try:
                    rulesets.ruleset(ruleset)
                except UnknownNameError as exc:
                    raise ValueError(f"names an unknown ruleset in {entry!r}: {exc}") from None
        return value

    @field_validator("refresh_budget")
    @classmethod
    def _check_refresh_budget(cls, value: str) -> str:
        refresh_budget_of(value)
        return value

    @property
    def refresh_schedule(self) -> CronSchedule | None:
        """The schedule of refreshes (NEVIS_REFRESH_CRON), or None when it is off."""
        return CronSchedule.parse(self.refresh_cron) if self.refresh_cron else None


__all__ = ["BUILTIN_LEARNER", "RefreshSettings", "refresh_budget_of"]
