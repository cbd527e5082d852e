"""The migrations build exactly the models' schema, on SQLite and PostgreSQL, both ways."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import get_args

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, Column, Engine, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.exc import StatementError

from services.core.errors import DatabaseError
from services.store.db import models
from services.store.db.engine import make_engine, session_factory, transaction
from services.store.db.migrate import (
    current_revision,
    downgrade,
    ensure_current,
    head_revision,
    known_revisions,
    upgrade,
)
from services.store.db.models import Base, Event
from workers.stream.manifest import SPLITS, Phase, TaskKind

TABLES = {
    "stream_versions",
    "stream_tasks",
    "datasets",
    "shards",
    "learners",
    "submissions",
    "task_runs",
    "trials",
    "checkpoints",
    "task_results",
    "events",
}


def _differences(engine: Engine, metadata: MetaData = Base.metadata) -> list:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(context, metadata)


def _triggers(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        else:
            sql = "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
        return set(connection.execute(text(sql)).scalars())


def test_upgrade_reaches_head_with_every_table(database_url: str, db_engine: Engine) -> None:
    assert current_revision(database_url) == head_revision()
    assert head_revision() == known_revisions()[-1]
    ensure_current(database_url)
    assert set(inspect(db_engine).get_table_names()) >= TABLES


def test_models_and_migrations_have_no_difference(db_engine: Engine) -> None:
    assert _differences(db_engine) == []


def test_comparison_notices_a_table_the_migrations_lack(db_engine: Engine) -> None:
    extended = MetaData()
    for table in Base.metadata.tables.values():
        table.to_metadata(extended)
    Table("table_only_in_the_models", extended, Column("id", Integer, primary_key=True))
    kinds = [diff[0] for diff in _differences(db_engine, extended)]
    assert kinds == ["add_table"]


def test_check_constraints_match_the_models(db_engine: Engine) -> None:
    inspector = inspect(db_engine)
    for name, table in Base.metadata.tables.items():
        expected = {c.name for c in table.constraints if isinstance(c, CheckConstraint)}
        found = {c["name"] for c in inspector.get_check_constraints(name)}
        assert found == expected, name


def test_events_triggers_are_installed(db_engine: Engine) -> None:
    if db_engine.dialect.name == "sqlite":
        assert _triggers(db_engine) == {"events_append_only_update", "events_append_only_delete"}
    else:
        assert _triggers(db_engine) == {"events_append_only_rows", "events_append_only_truncate"}


def test_downgrade_to_base_then_upgrade_again(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    downgrade(empty_database_url, "base")
    assert current_revision(empty_database_url) is None
    engine = make_engine(empty_database_url)
    try:
        assert set(inspect(engine).get_table_names()) == {"alembic_version"}
        assert _triggers(engine) == set()
        upgrade(empty_database_url)
        assert current_revision(empty_database_url) == head_revision()
        assert _differences(engine) == []
        assert len(_triggers(engine)) == 2
    finally:
        engine.dispose()


def test_timestamps_come_back_as_aware_utc(db_engine: Engine) -> None:
    sessions = session_factory(db_engine)
    local = datetime(2024, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    with transaction(sessions) as session:
        session.add(Event(kind="note", payload={"x": 1}, created_at=local))
        session.execute(text("INSERT INTO events (kind, payload) VALUES ('raw', '{}')"))
    with sessions() as session:
        stamps = dict(session.execute(select(Event.kind, Event.created_at)).all())
    assert stamps["note"] == local
    assert stamps["note"].tzinfo == UTC and stamps["note"].hour == 10
    # The server default fills rows written without the ORM.
    assert stamps["raw"].tzinfo == UTC
    assert abs(datetime.now(UTC) - stamps["raw"]) < timedelta(minutes=5)


def test_naive_timestamps_are_refused(db_engine: Engine) -> None:
    with pytest.raises(StatementError, match="aware datetime"):
        with transaction(session_factory(db_engine)) as session:
            session.add(Event(kind="note", payload={}, created_at=datetime(2024, 1, 1)))


def test_transaction_rolls_back_when_the_block_raises(db_engine: Engine) -> None:
    sessions = session_factory(db_engine)
    with pytest.raises(RuntimeError):
        with transaction(sessions) as session:
            session.add(Event(kind="lost", payload={}))
            session.flush()
            raise RuntimeError("abort")
    with sessions() as session:
        assert session.scalars(select(Event.kind)).all() == []


def test_a_unit_of_work_that_reads_then_writes_survives_a_concurrent_writer(db_engine: Engine) -> None:
    # On SQLite a deferred reader cannot become a writer once another connection has
    # committed since its read; it used to fail at once with "database is locked".
    import threading

    sessions = session_factory(db_engine)
    other_done = threading.Event()

    def other_writer() -> None:
        with transaction(sessions) as session:
            session.add(Event(kind="other", payload={}))
        other_done.set()

    with transaction(sessions) as session:
        assert session.scalars(select(Event.kind)).all() == []  # read first
        thread = threading.Thread(target=other_writer)
        thread.start()
        other_done.wait(0.5)  # SQLite: blocked on our write lock; PostgreSQL: committed
        session.add(Event(kind="mine", payload={}))  # then write
    thread.join(30)
    assert other_done.is_set()
    with sessions() as session:
        assert sorted(session.scalars(select(Event.kind)).all()) == ["mine", "other"]


def test_engine_settings(db_engine: Engine) -> None:
    with db_engine.connect() as connection:
        if db_engine.dialect.name == "sqlite":
            pragmas = {
                name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("foreign_keys", "journal_mode", "busy_timeout")
            }
            assert pragmas == {"foreign_keys": 1, "journal_mode": "wal", "busy_timeout": 30_000}
        else:
            assert db_engine.pool._pre_ping is True
            assert connection.execute(text("SELECT 1")).scalar() == 1


def test_vocabularies_agree_with_the_stream_manifest() -> None:
    assert models.SHARD_SPLITS == SPLITS
    assert get_args(Phase) == models.PHASES
    assert get_args(TaskKind) == models.TASK_KINDS
    assert set(models.ACTIVE_TASK_RUN_STATUSES) <= set(models.TASK_RUN_STATUSES)


def test_ensure_current_refuses_an_empty_database(empty_database_url: str) -> None:
    with pytest.raises(DatabaseError, match=rf"revision none.*code expects {head_revision()}.*nevis db upgrade"):
        ensure_current(empty_database_url)


def test_ensure_current_refuses_a_database_newer_than_the_code(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    engine = make_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    finally:
        engine.dispose()
    with pytest.raises(DatabaseError, match="revision 9999, which this code does not know"):
        ensure_current(empty_database_url)


def test_missing_sqlite_file_reads_as_no_schema_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite"
    url = f"sqlite:///{path}"
    assert current_revision(url) is None
    with pytest.raises(DatabaseError, match="nevis db upgrade"):
        ensure_current(url)
    assert not path.exists()


def test_unreachable_server_names_the_url_without_its_password() -> None:
    url = "postgresql+psycopg://nevis:hunter2@127.0.0.1:9/nevis?connect_timeout=2"
    with pytest.raises(DatabaseError, match="Cannot connect") as caught:
        current_revision(url)
    assert "nevis:***@127.0.0.1:9/nevis" in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "match"), [("not a url", "Cannot parse the database URL"), ("nosuchdb://x/y", "No driver")]
)
def test_bad_urls_are_clear_errors(url: str, match: str) -> None:
    with pytest.raises(DatabaseError, match=match):
        upgrade(url)


def test_unknown_revision_suggests_known_ones(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    with pytest.raises(DatabaseError, match=r"Unknown revision '0099'.*Did you mean '00[0-9][0-9]'"):
        downgrade(empty_database_url, "0099")
    assert current_revision(empty_database_url) == head_revision()


def _insert_stream_and_learner(connection) -> None:
    """Stream version 1 and learner 1, by raw SQL (the ORM models are the newest schema's)."""
    connection.execute(
        text(
            "INSERT INTO stream_versions (id, name, version, manifest_sha256, manifest) "
            "VALUES (1, 'mini', '1', :sha, '{}')"
        ),
        {"sha": "a" * 64},
    )
    connection.execute(
        text("INSERT INTO learners (id, name, entrypoint, resources) VALUES (1, 'indep', 'indep', '{}')")
    )


def test_0004_moves_the_image_size_out_of_the_budget_and_back(empty_database_url: str) -> None:
    """Rows made before 0004 keep their image size (now a column) and lose the manifest path."""
    upgrade(empty_database_url, "0003")
    engine = make_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            _insert_stream_and_learner(connection)
            for row_id, budget in (
                (1, '{"trials": 2, "image_size": 32, "stream_ref": "/x/mini.json"}'),
                (2, '{"trials": 3}'),
            ):
                connection.execute(
                    text(
                        "INSERT INTO submissions (id, learner_id, stream_version_id, phase, budget) "
                        "VALUES (:id, 1, 1, 'meta_test', :budget)"
                    ),
                    {"id": row_id, "budget": budget},
                )
        upgrade(empty_database_url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, image_size, budget FROM submissions ORDER BY id")).all()
        budgets = [r[2] if isinstance(r[2], dict) else json.loads(r[2]) for r in rows]
        assert [(r[0], r[1]) for r in rows] == [(1, 32), (2, 64)]  # 64: the old default
        assert budgets == [{"trials": 2}, {"trials": 3}]
        assert _differences(engine) == []
        with pytest.raises(Exception, match="image_size"):
            with engine.begin() as connection:
                connection.execute(text("UPDATE submissions SET image_size = 4 WHERE id = 1"))
        downgrade(empty_database_url, "0003")
        with engine.connect() as connection:
            back = connection.execute(text("SELECT budget FROM submissions WHERE id = 1")).scalar_one()
        back = back if isinstance(back, dict) else json.loads(back)
        assert back == {"trials": 2, "image_size": 32, "stream_ref": "mini"}
    finally:
        engine.dispose()


def test_0006_turns_disable_markers_into_disabled_at_and_back(empty_database_url: str) -> None:
    """A user disabled by a marker token row before 0006 stays disabled after it, and back."""
    upgrade(empty_database_url, "0005")
    engine = make_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO users (id, name, role) VALUES (1, 'erin', 'submitter'), (2, 'finn', 'submitter')")
            )
            connection.execute(
                text(
                    "INSERT INTO api_tokens (user_id, label, token_prefix, token_sha256, revoked_at) VALUES "
                    "(1, 'account disabled', 'disabled', :a, CURRENT_TIMESTAMP), "
                    "(2, 'laptop', 'nvs_abcd', :b, NULL)"
                ),
                {"a": "a" * 64, "b": "b" * 64},
            )
        upgrade(empty_database_url)
        with engine.connect() as connection:
            users = connection.execute(text("SELECT name, disabled_at IS NOT NULL FROM users ORDER BY id")).all()
            prefixes = connection.execute(text("SELECT token_prefix FROM api_tokens")).scalars().all()
        assert [tuple(u) for u in users] == [("erin", True), ("finn", False)]
        assert prefixes == ["nvs_abcd"]
        assert _differences(engine) == []
        downgrade(empty_database_url, "0005")
        with engine.connect() as connection:
            back = (
                connection.execute(text("SELECT user_id FROM api_tokens WHERE token_prefix = 'disabled'"))
                .scalars()
                .all()
            )
        assert back == [1]
    finally:
        engine.dispose()


def test_0007_leaves_existing_submissions_public(empty_database_url: str) -> None:
    """Rows made before 0007 read as public after it; the CHECK refuses other values."""
    upgrade(empty_database_url, "0006")
    engine = make_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            _insert_stream_and_learner(connection)
            connection.execute(
                text(
                    "INSERT INTO submissions (id, learner_id, stream_version_id, phase, budget, image_size) "
                    "VALUES (1, 1, 1, 'meta_test', '{}', 32), (2, 1, 1, 'meta_train', '{}', 32)"
                )
            )
        upgrade(empty_database_url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, visibility FROM submissions ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [(1, "public"), (2, "public")]
        assert _differences(engine) == []
        with engine.begin() as connection:
            connection.execute(text("UPDATE submissions SET visibility = 'private' WHERE id = 2"))
        with pytest.raises(Exception, match="visibility"):
            with engine.begin() as connection:
                connection.execute(text("UPDATE submissions SET visibility = 'secret' WHERE id = 1"))
        downgrade(empty_database_url, "0006")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM submissions")).scalar_one() == 2
            assert "visibility" not in {c["name"] for c in inspect(connection).get_columns("submissions")}
    finally:
        engine.dispose()


def test_0010_turns_runs_stopped_by_a_cap_into_stopped_and_back(empty_database_url: str) -> None:
    """Before 0010 a cap stop was a failure whose error began ``stopped: `` (``nevis run``) or
    carried it after the coordinator's wrapper; after it such rows are ``stopped`` with the bare
    reason, other failures stay failed, and the downgrade puts the old form back."""
    upgrade(empty_database_url, "0009")
    engine = make_engine(empty_database_url)
    errors = {
        1: "stopped: FLOP cap 1 reached (2.5 spent)",  # nevis run
        2: "task 2 failed after 1 attempt: stopped: wall-time cap 60 s reached (61 s spent)",  # coordinator
        3: "task 1 failed after 3 attempts: LearnerError: stopped: by the learner",  # a real failure
        4: "Task 1 (shapes:shape) failed: all 2 trials failed",
    }
    try:
        with engine.begin() as connection:
            _insert_stream_and_learner(connection)
            for row_id, error in errors.items():
                connection.execute(
                    text(
                        "INSERT INTO submissions (id, learner_id, stream_version_id, phase, budget, image_size, "
                        "status, error) VALUES (:id, 1, 1, 'meta_test', '{}', 32, 'failed', :error)"
                    ),
                    {"id": row_id, "error": error},
                )
            connection.execute(
                text(
                    "INSERT INTO submissions (id, learner_id, stream_version_id, phase, budget, image_size, status) "
                    "VALUES (5, 1, 1, 'meta_test', '{}', 32, 'succeeded')"
                )
            )
            with pytest.raises(Exception, match="status"):
                with connection.begin_nested():
                    connection.execute(text("UPDATE submissions SET status = 'stopped' WHERE id = 5"))
        upgrade(empty_database_url)
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT id, status, error, finished_at IS NOT NULL FROM submissions ORDER BY id")
            ).all()
        assert [tuple(r) for r in rows] == [
            (1, "stopped", "FLOP cap 1 reached (2.5 spent)", True),
            (2, "stopped", "wall-time cap 60 s reached (61 s spent)", True),
            (3, "failed", errors[3], False),
            (4, "failed", errors[4], False),
            (5, "succeeded", None, False),
        ]
        assert _differences(engine) == []
        with pytest.raises(Exception, match="status"):
            with engine.begin() as connection:
                connection.execute(text("UPDATE submissions SET status = 'paused' WHERE id = 5"))
        downgrade(empty_database_url, "0009")
        with engine.connect() as connection:
            back = connection.execute(text("SELECT id, status, error FROM submissions ORDER BY id")).all()
        assert [tuple(r) for r in back][:2] == [
            (1, "failed", "stopped: FLOP cap 1 reached (2.5 spent)"),
            (2, "failed", "stopped: wall-time cap 60 s reached (61 s spent)"),
        ]
        assert [r[1] for r in back] == ["failed", "failed", "failed", "failed", "succeeded"]
        with pytest.raises(Exception, match="status"):
            with engine.begin() as connection:
                connection.execute(text("UPDATE submissions SET status = 'stopped' WHERE id = 5"))
    finally:
        engine.dispose()
