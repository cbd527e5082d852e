"""Answers under a stream of commits (``AnswerCache``): after the fingerprint changes, a query
answered recently gets its previous answer at once while the new one renders in the
background, once, and not again within ``RERENDER_EVERY_S``; a query never answered, one
answered too long ago, and a cache that reads the fingerprint every time (tests that read their
own writes) wait for the render."""

from __future__ import annotations

import asyncio
from contextlib import nullcontext

import pytest

from services.coordinator.api import answers
from services.coordinator.api.answers import AnswerCache


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A stand-in database whose fingerprint the test sets; re-read on every answer."""
    state = {"fingerprint": 1}
    monkeypatch.setattr(answers, "fingerprint", lambda session: state["fingerprint"])
    monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 1e-9)
    return state


def _sessions() -> nullcontext:
    return nullcontext()


def test_a_recent_answer_is_sent_while_its_successor_renders(database: dict[str, int]) -> None:
    cache, renders = AnswerCache(8), []

    def render(session: object) -> str:
        renders.append(database["fingerprint"])
        return f"answer at {database['fingerprint']}"

    async def reads() -> list[str]:
        got = [await cache.answer(_sessions, "board", render)]  # never answered: waits
        database["fingerprint"] = 2
        got += [await cache.answer(_sessions, "board", render) for _ in range(3)]  # the old one, at once
        got.append(await cache.answer(_sessions, "front", render))  # never answered: waits
        await asyncio.gather(*cache._workers)  # the background render, once for the three readers
        got.append(await cache.answer(_sessions, "board", render))
        return got

    got = asyncio.run(reads())
    assert got[:2] == ["answer at 1"] * 2 and got[4:] == ["answer at 2"] * 2
    assert set(got[2:4]) <= {"answer at 1", "answer at 2"}  # the background render may be done by then
    assert renders == [1, 2, 2]  # board at 1, board at 2 (in the background, once), front at 2


def test_an_answer_superseded_too_long_ago_is_rendered_first(
    database: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = AnswerCache(8)

    def render(session: object) -> str:
        return f"answer at {database['fingerprint']}"

    async def reads() -> list[str]:
        got = [await cache.answer(_sessions, "board", render)]
        database["fingerprint"] = 2
        monkeypatch.setattr(answers, "STALE_FOR_S", -1.0)
        got.append(await cache.answer(_sessions, "board", render))
        database["fingerprint"] = 3
        monkeypatch.setattr(answers, "STALE_FOR_S", 10.0)
        monkeypatch.setattr(answers, "FINGERPRINT_TTL_S", 0.0)  # every change seen at once
        got.append(await cache.answer(_sessions, "board", render))
        return got

    assert asyncio.run(reads()) == ["answer at 1", "answer at 2", "answer at 3"]


def test_a_query_is_rendered_again_in_the_background_at_most_every_few_seconds(
    database: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, renders = AnswerCache(8), []

    def render(session: object) -> str:
        renders.append(database["fingerprint"])
        return f"answer at {database['fingerprint']}"

    async def reads() -> list[str]:
        got = [await cache.answer(_sessions, "board", render)]
        database["fingerprint"] = 2
        got.append(await cache.answer(_sessions, "board", render))  # at 1; 2 renders behind it
        await asyncio.gather(*cache._workers)
        database["fingerprint"] = 3  # a commit right after that render began
        got.append(await cache.answer(_sessions, "board", render))  # at 2, and no render queued
        await asyncio.gather(*cache._workers)
        assert cache.renders_soon("board", 2, 3)  # so the bytes kept at 2 may be sent as they are
        got.append(await cache.answer(_sessions, "board", render))  # still at 2
        monkeypatch.setattr(answers, "RERENDER_EVERY_S", 0.0)  # as if the interval had passed
        got.append(await cache.answer(_sessions, "board", render))  # at 2; 3 renders behind it
        await asyncio.gather(*cache._workers)
        got.append(await cache.answer(_sessions, "board", render))
        return got

    assert asyncio.run(reads()) == [
        "answer at 1",
        "answer at 1",
        "answer at 2",
        "answer at 2",
        "answer at 2",
        "answer at 3",
    ]
    assert renders == [1, 2, 3]
