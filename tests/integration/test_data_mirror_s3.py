"""``nevis data mirror --to s3://...`` fills a mirror that ``fetch`` then reads, against moto's
S3 server (the stand-in tests/integration/test_s3_store.py uses), over real HTTP."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from tests.support import moto_s3
from tests.support.range_server import RangeServer
from workers.ingest.sources.fetch import fetch_sources
from workers.ingest.sources.locations import s3_client
from workers.ingest.sources.mirror import MISSING, THERE, UPLOADED, upload_to_mirror
from workers.stream.sources.catalogue import Source, SourceFile

s3_endpoint = moto_s3.s3_endpoint  # the local S3 stand-in (fixtures)
fake_aws_credentials = moto_s3.fake_aws_credentials

DATA = bytes(range(251)) * 80
CHECKSUM = "sha256:" + hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def bucket(s3_endpoint) -> str:
    name = f"mirror-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def demo(origin: str) -> Source:
    return Source(
        key="demo",
        files=(
            SourceFile(name="data.bin", url=f"{origin}/data.bin", checksum=CHECKSUM),
            SourceFile(name="never.bin", url=f"{origin}/never.bin", checksum=CHECKSUM),
        ),
    )


def test_a_mirror_filled_on_one_machine_feeds_a_fetch_on_another(tmp_path, s3_endpoint, bucket):
    online, offline = tmp_path / "online", tmp_path / "offline"
    with RangeServer({"/o/data.bin": DATA}).running() as server:
        source = demo(server.url("/o"))
        [result] = fetch_sources([source], online)
    assert [f.status for f in result.files] == ["fetched", "failed"]  # never.bin: 404 at the origin

    client = s3_client(s3_endpoint)
    target = f"s3://{bucket}/nevis/sources"
    rows = upload_to_mirror([source], online, target, client)
    assert [(r.name, r.status) for r in rows] == [("data.bin", UPLOADED), ("never.bin", MISSING)]
    head = client.head_object(Bucket=bucket, Key="nevis/sources/demo/data.bin")
    assert head["Metadata"]["sha256"] == CHECKSUM.removeprefix("sha256:")
    again = upload_to_mirror([source], online, target, client)
    assert again[0].status == THERE

    dead_origin = demo("http://127.0.0.1:9/o")  # the offline cluster cannot reach the origin
    only_data = Source(key="demo", files=dead_origin.files[:1])
    [fetched] = fetch_sources([only_data], offline, mirror=target, s3_endpoint_url=s3_endpoint, attempts=1)
    assert fetched.outcome == "fetched", fetched.detail
    assert (offline / "demo" / "data.bin").read_bytes() == DATA


def test_an_s3_mirror_download_resumes_from_a_part_file(tmp_path, s3_endpoint, bucket):
    client = s3_client(s3_endpoint)
    client.put_object(Bucket=bucket, Key="m/demo/data.bin", Body=DATA)
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "data.bin.part").write_bytes(DATA[:5000])
    source = Source(key="demo", files=demo("http://127.0.0.1:9/o").files[:1])
    [result] = fetch_sources([source], tmp_path, mirror=f"s3://{bucket}/m", s3_endpoint_url=s3_endpoint, attempts=1)
    assert result.outcome == "fetched", result.detail
    assert (tmp_path / "demo" / "data.bin").read_bytes() == DATA


def test_the_mirror_command_uploads_what_this_machine_verified(settings_env, monkeypatch, s3_endpoint, bucket):
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.core.config import get_settings
    from workers.ingest.sources.verify import FetchState

    dest = settings_env / "sources"
    (dest / "mnist").mkdir(parents=True)
    path = dest / "mnist" / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(DATA)
    FetchState(dest).record("mnist/t10k-labels-idx1-ubyte.gz", path, CHECKSUM.removeprefix("sha256:"))
    monkeypatch.setenv("NEVIS_S3_ENDPOINT_URL", s3_endpoint)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["data", "mirror", "--to", f"s3://{bucket}/srv", "--datasets", "mnist"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert "mnist/t10k-labels-idx1-ubyte.gz: uploaded" in result.stdout
    assert "1 file(s) in the mirror" in result.stdout and "3 not fetched here were skipped" in result.stdout
    body = s3_client(s3_endpoint).get_object(Bucket=bucket, Key="srv/mnist/t10k-labels-idx1-ubyte.gz")["Body"].read()
    assert body == DATA
