"""``sessions_on(url)``: the one way a process opens its sessions on a database URL."""

from __future__ import annotations

from sqlalchemy import text

from services.store.db import sessions_on


def test_sessions_on_a_url_share_one_engine_and_keep_objects_readable_after_commit(tmp_path) -> None:
    sessions = sessions_on(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert sessions.kw["expire_on_commit"] is False
    with sessions() as first, sessions() as second:
        assert first.get_bind() is second.get_bind()
        assert first.execute(text("PRAGMA foreign_keys")).scalar() == 1  # the project's engine settings
    sessions.kw["bind"].dispose()
