"""A token minted from a token while that token is being revoked never escapes the revocation
(PostgreSQL, two real sessions; SQLite writers take turns, so there is no race to test)."""

from __future__ import annotations

import threading
import time

import pytest

from services.coordinator.common.client_errors import AuthenticationError
from services.coordinator.crud import users
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models_coordinator import ApiToken

# PostgreSQL only (not a skip): SQLite has one writer at a time, so a mint and a revocation
# cannot overlap there.
pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
def sessions(database_url: str):
    engine = make_engine(database_url)
    yield session_factory(engine)
    engine.dispose()


def _root(sessions) -> int:
    with transaction(sessions) as session:
        owner = users.create_user(session, name="alice", role="submitter")
        token, _ = users.create_token(session, user=owner, label="root")
        return token.id


def _revoke_in_thread(sessions, token_id: int) -> threading.Thread:
    def revoke() -> None:
        with transaction(sessions) as session:
            users.revoke_token(session, user=users.get_user(session, name="alice"), token_id=token_id)

    thread = threading.Thread(target=revoke, daemon=True)
    thread.start()
    return thread


def test_a_child_committed_while_its_parent_is_revoked_is_revoked_too(sessions):
    root_id = _root(sessions)
    with sessions() as minting:
        users.mint_for(minting, token=minting.get(ApiToken, root_id), max_tokens=None)
        child, _ = users.create_token(minting, user=users.get_user(minting, name="alice"), label="child")
        revoking = _revoke_in_thread(sessions, root_id)
        time.sleep(0.5)
        assert revoking.is_alive()  # waits for the minter's lock on the parent
        minting.commit()
        child_id = child.id
    revoking.join(timeout=30)
    assert not revoking.is_alive()
    with sessions() as session:
        assert session.get(ApiToken, root_id).revoked_at is not None
        assert session.get(ApiToken, child_id).revoked_at is not None


def test_a_mint_from_a_token_being_revoked_is_refused(sessions):
    root_id = _root(sessions)
    with sessions() as revoking:
        users.revoke_token(revoking, user=users.get_user(revoking, name="alice"), token_id=root_id)
        errors: list[BaseException] = []

        def mint() -> None:
            with sessions() as minting:
                users.mint_for(minting, token=minting.get(ApiToken, root_id), max_tokens=None)
                try:
                    users.create_token(minting, user=users.get_user(minting, name="alice"), label="late")
                    minting.commit()
                except AuthenticationError as exc:
                    errors.append(exc)

        thread = threading.Thread(target=mint, daemon=True)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()  # waits for the revocation's lock on the parent
        revoking.commit()
    thread.join(timeout=30)
    assert not thread.is_alive() and len(errors) == 1
    with sessions() as session:
        assert [t.label for t in session.query(ApiToken).all()] == ["root"]
