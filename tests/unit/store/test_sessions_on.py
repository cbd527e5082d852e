"""``sessions_on(url)``: the one way a process opens its sessions on a database URL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from services.store.db import sessions_on


def test_sessions_on_a_url_share_one_engine_and_keep_objects_readable_after_commit(tmp_path) -> None:
    sessions = sessions_on(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert sessions.kw["expire_on_commit"] is False
    with sessions() as first, sessions() as second:
        assert first.get_bind() is second.get_bind()
        assert first.execute(text("PRAGMA foreign_keys")).scalar() == 1  # the project's engine settings
    sessions.kw["bind"].dispose()


def test_no_code_writes_the_helper_out_again() -> None:
    # Built from parts, so this file does not match itself.
    spelled_out = "session_factory(" + "make_engine("
    root = Path(__file__).resolve().parents[3]
    found = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("services", "workers", "tests", "bench", "scripts")
        for path in sorted((root / folder).rglob("*.py"))
        if root / "services" / "store" / "db" not in path.parents  # where it is defined and described
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if spelled_out in line.replace(" ", "")
    ]
    assert not found, f"use services.store.db.sessions_on(url) instead of {spelled_out}url)): {found}"
