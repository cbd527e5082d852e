"""Secrets paths: how a remote worker harness gets its credentials without a job carrying them."""

from __future__ import annotations

import pytest

from services.coordinator.backends.base import worker_env, worker_settings_env
from services.coordinator.common.config import WORKER_KNOB_VARS, CoordinatorSettings
from services.core.credentials import CREDENTIAL_VARS, load_secrets_path, read_secrets_path
from services.core.errors import ConfigError


def test_a_secrets_file_sets_its_names(tmp_path):
    path = tmp_path / "worker.env"
    path.write_text(
        "# the harness's credentials\nNEVIS_DATABASE_URL=postgresql+psycopg://u:pw@db/n\n"
        "export AWS_SECRET_ACCESS_KEY='k=ey'\n\nAWS_DEFAULT_REGION = eu-west-1\n"
    )
    environ = {"NEVIS_SECRETS_PATH": str(path), "OTHER": "1"}
    assert load_secrets_path(environ) == ["AWS_DEFAULT_REGION", "AWS_SECRET_ACCESS_KEY", "NEVIS_DATABASE_URL"]
    assert environ["NEVIS_DATABASE_URL"] == "postgresql+psycopg://u:pw@db/n"
    assert environ["AWS_SECRET_ACCESS_KEY"] == "k=ey" and environ["AWS_DEFAULT_REGION"] == "eu-west-1"


def test_a_mounted_secret_folder_has_one_file_per_name(tmp_path):
    (tmp_path / "NEVIS_STORE_URL").write_text("s3://bucket/prefix\n")
    (tmp_path / "PGPASSWORD").write_text("pw")
    (tmp_path / "..data").mkdir()  # what Kubernetes adds beside the keys
    assert read_secrets_path(tmp_path) == {"NEVIS_STORE_URL": "s3://bucket/prefix", "PGPASSWORD": "pw"}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("NEVIS_DATABASE_URL=x\nLD_PRELOAD=/tmp/evil.so\n", "sets LD_PRELOAD; a secrets path may set only"),
        ("NEVIS_DATABASE_URL\n", "line 1 is not NAME=value"),
    ],
)
def test_bad_secrets_files_are_refused_by_name(tmp_path, content, words):
    path = tmp_path / "worker.env"
    path.write_text(content)
    with pytest.raises(ConfigError, match=words):
        read_secrets_path(path)


def test_a_missing_secrets_path_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="NEVIS_SECRETS_PATH=.*no such file or folder"):
        load_secrets_path({"NEVIS_SECRETS_PATH": str(tmp_path / "absent")})
    assert load_secrets_path({}) == []


def test_remote_workers_get_knobs_and_no_credential(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-key")
    settings = CoordinatorSettings(
        data_dir=tmp_path,
        database_url="postgresql+psycopg://u:secret@h/db",
        s3_endpoint_url="http://minio:9000",
        max_attempts=5,
    )
    remote = worker_settings_env(settings)
    assert not set(remote) & set(CREDENTIAL_VARS)
    assert "secret" not in "".join(remote.values()) and remote["NEVIS_MAX_ATTEMPTS"] == "5"
    # NEVIS_SANDBOX=auto is resolved where the hosts start (a pod's bwrap is never overridden)
    # NEVIS_LEARNER_NODE_RESOURCE is unset by default (no learner nodes): sent only when set
    assert set(WORKER_KNOB_VARS) - {"NEVIS_STREAMS_DIR", "NEVIS_SANDBOX", "NEVIS_LEARNER_NODE_RESOURCE"} <= set(remote)
    named = settings.model_copy(update={"learner_node_resource": "nevis_learner"})
    assert worker_settings_env(named)["NEVIS_LEARNER_NODE_RESOURCE"] == "nevis_learner"
    assert worker_settings_env(settings.model_copy(update={"sandbox": "bwrap"}))["NEVIS_SANDBOX"] == "bwrap"
    local = worker_env(settings)  # workers on this machine get both
    assert local["NEVIS_DATABASE_URL"] == settings.database_url
    assert local["AWS_SECRET_ACCESS_KEY"] == "secret-key" and local["NEVIS_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert remote.items() <= local.items()
