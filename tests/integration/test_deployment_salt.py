"""A production deployment left without NEVIS_SPLIT_SALT splits with its own salt, made once
and shared through the database; a configured salt wins; development keeps the public splits."""

from __future__ import annotations

from services.store.db import sessions_on
from services.store.db.models_secrets import DeploymentSecret
from services.store.deployment_salt import NAME, split_salt


def test_production_makes_one_salt_and_every_process_reads_it(database_url):
    first, second = sessions_on(database_url), sessions_on(database_url)  # two processes' sessions
    assert split_salt(first, "", "development") == ""
    made = split_salt(first, "", "production")
    assert len(made) == 64 and int(made, 16) >= 0
    assert split_salt(second, "", "production") == made
    assert split_salt(second, "a-configured-salt-of-ours", "production") == "a-configured-salt-of-ours"
    with second() as session:
        assert session.get(DeploymentSecret, NAME).value == made
