"""Revision 0012 (``api_tokens.parent_token_id``) on SQLite and PostgreSQL, both ways: tokens
made before it keep no parent, the column's foreign key and index match the models, deleting a
parent leaves its children without one, and the downgrade drops the column and keeps the rows."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from services.store.db.engine import make_engine
from services.store.db.migrate import downgrade, upgrade
from services.store.db.models import Base


def _differences(engine: Engine) -> list:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(context, Base.metadata)


def _token(connection, token_id: int, parent: int | None = None) -> None:
    columns = "id, user_id, label, token_prefix, token_sha256" + (", parent_token_id" if parent else "")
    values = ":id, 1, 't', 'nvs_abcdefgh', :sha" + (", :parent" if parent else "")
    connection.execute(
        text(f"INSERT INTO api_tokens ({columns}) VALUES ({values})"),
        {"id": token_id, "sha": f"{token_id:064x}", "parent": parent},
    )


def test_0012_adds_the_parent_link_and_takes_it_away(empty_database_url: str) -> None:
    upgrade(empty_database_url, "0011")
    engine = make_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO users (id, name, role) VALUES (1, 'alice', 'submitter')"))
            _token(connection, 1)
        upgrade(empty_database_url)
        assert _differences(engine) == []
        with engine.begin() as connection:
            assert connection.execute(text("SELECT parent_token_id FROM api_tokens")).scalar_one() is None
            _token(connection, 2, parent=1)
            _token(connection, 3, parent=2)
            indexes = {ix["name"] for ix in inspect(connection).get_indexes("api_tokens")}
            assert "ix_api_tokens_parent_token_id" in indexes
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM api_tokens WHERE id = 2"))
            rows = connection.execute(text("SELECT id, parent_token_id FROM api_tokens ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [(1, None), (3, None)]  # SET NULL, not a cascade
        downgrade(empty_database_url, "0011")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM api_tokens")).scalar_one() == 2
            assert "parent_token_id" not in {c["name"] for c in inspect(connection).get_columns("api_tokens")}
            assert not inspect(connection).get_foreign_keys("api_tokens")[1:]  # only user_id's
        upgrade(empty_database_url)
        assert _differences(engine) == []
    finally:
        engine.dispose()
