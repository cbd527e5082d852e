"""A database seeded with synthetic finished runs, for the leaderboard's read-path tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from services.coordinator.api import answers
from services.coordinator.common.config import CoordinatorSettings
from services.store.db import sessions_on, transaction
from tests.support.synthetic_results import seed_results


@pytest.fixture
def seed_board(database_url, tmp_path, monkeypatch) -> Callable[..., tuple[CoordinatorSettings, Any, Any]]:
    """``seed_board(submissions=, tasks=, seed=)`` → (settings, sessions, seeded stream); the
    answer cache sees every database change at once."""
    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 0.0)

    def seed(*, submissions: int, tasks: int, seed: int) -> tuple[CoordinatorSettings, Any, Any]:
        sessions = sessions_on(database_url)
        with transaction(sessions) as session:
            stream = seed_results(session, submissions=submissions, tasks=tasks, seed=seed)
        return CoordinatorSettings(data_dir=tmp_path, database_url=database_url), sessions, stream

    return seed
