"""The S3 backend over real HTTP against moto's S3 server, beside the local backend.

The first half is one behaviour suite run on both backends (the ObjectStore contract); the
second half covers what only S3 has: the bucket, its prefix, metadata, multipart uploads
and the mapping of S3 failures to the project's errors.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import time
import uuid

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from services.core.errors import (
    ConfigError,
    DataIntegrityError,
    InvalidKeyError,
    ObjectNotFoundError,
    ObjectTooLargeError,
)
from services.store.objects import LocalObjectStore, ObjectStore, open_store
from services.store.objects.s3 import S3ObjectStore
from tests.support import moto_s3

s3_endpoint = moto_s3.s3_endpoint  # the local S3 stand-in (fixtures)
fake_aws_credentials = moto_s3.fake_aws_credentials

PREFIX = "nevis/test"
# S3 parts are at least 5 MiB; a 1 MiB threshold makes a 6 MiB file a 2-part upload.
SMALL_PARTS = TransferConfig(multipart_threshold=1 << 20, multipart_chunksize=5 << 20)
MULTIPART_BYTES = 6 << 20


@pytest.fixture
def s3_client(s3_endpoint):
    return boto3.client("s3", endpoint_url=s3_endpoint, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture
def bucket(s3_client) -> str:
    name = f"nevis-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_store(bucket, s3_endpoint) -> S3ObjectStore:
    return S3ObjectStore(bucket, PREFIX, endpoint_url=s3_endpoint, transfer_config=SMALL_PARTS)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> ObjectStore:
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    return request.getfixturevalue("s3_store")


def tamper(store: ObjectStore, key: str, data: bytes, request) -> None:
    """Replace an object's bytes behind the store's back, keeping its recorded sha256."""
    if isinstance(store, LocalObjectStore):
        digest = store.info(key).sha256
        (store.root / "blobs" / digest[:2] / digest).write_bytes(data)
        return
    client = request.getfixturevalue("s3_client")
    raw_key = f"{PREFIX}/{key}"
    metadata = client.head_object(Bucket=store.bucket, Key=raw_key)["Metadata"]
    client.put_object(Bucket=store.bucket, Key=raw_key, Body=data, Metadata=metadata)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def failing_chunks():
    yield b"the first part of a new version"
    raise OSError("source failed midway")


# -- the contract, on both backends -----------------------------------------------------


def test_store_satisfies_the_protocol(store):
    assert isinstance(store, ObjectStore)


def test_bytes_round_trip_with_recorded_checksum(store):
    info = store.put_bytes("a/b.npz", b"payload")
    assert (info.key, info.size, info.sha256) == ("a/b.npz", 7, sha(b"payload"))
    assert store.get_bytes("a/b.npz") == b"payload"
    assert store.info("a/b.npz") == info
    assert store.verify("a/b.npz") == info
    assert store.exists("a/b.npz") and not store.exists("a/c.npz")


def test_an_object_over_the_readers_limit_is_refused_unread(store):
    """``max_bytes`` is held to the recorded size (or S3's length) before the body is read."""
    store.put_bytes("runs/1/state.pkl", b"s" * 1000)
    with pytest.raises(ObjectTooLargeError, match="1000 bytes, over the 999-byte limit"):
        store.get_bytes("runs/1/state.pkl", max_bytes=999)
    assert store.get_bytes("runs/1/state.pkl", max_bytes=1000) == b"s" * 1000


def test_multipart_sized_file_round_trip(store, tmp_path):
    data = os.urandom(MULTIPART_BYTES)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    info = store.put_file("ckpt/big.bin", source)
    assert (info.size, info.sha256) == (len(data), sha(data))
    target = tmp_path / "down" / "big.bin"
    assert store.get_file("ckpt/big.bin", target) == info
    assert target.read_bytes() == data
    assert [p.name for p in target.parent.iterdir()] == ["big.bin"]


def test_overwrite_replaces_bytes_and_checksum(store):
    store.put_bytes("k", b"old")
    info = store.put_bytes("k", b"newer bytes")
    assert store.get_bytes("k") == b"newer bytes"
    assert store.info("k") == info and info.sha256 == sha(b"newer bytes")
    assert list(store.list()) == ["k"]


def test_a_failed_write_leaves_the_old_object(store):
    old = store.put_bytes("k", b"old bytes")
    with pytest.raises(OSError, match="midway"):
        store.put_stream("k", failing_chunks())
    assert store.get_bytes("k") == b"old bytes"
    assert store.info("k") == old


@pytest.mark.parametrize("method", ["get_bytes", "verify", "get_file"])
def test_tampered_bytes_are_detected(store, tmp_path, request, method):
    info = store.put_bytes("k", b"original")
    tamper(store, "k", b"replaced behind its back", request)
    target = tmp_path / "out.bin"
    with pytest.raises(DataIntegrityError) as excinfo:
        getattr(store, method)("k", *((target,) if method == "get_file" else ()))
    message = str(excinfo.value)
    assert "'k'" in message and info.sha256 in message
    assert sha(b"replaced behind its back") in message
    # get_file leaves neither the target nor its temporary file behind.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".out.bin", "out.bin"))]


@pytest.mark.parametrize("method", ["get_bytes", "info", "verify", "get_file"])
def test_missing_key_names_the_key_and_the_store(store, tmp_path, method):
    args = (tmp_path / "out",) if method == "get_file" else ()
    with pytest.raises(ObjectNotFoundError) as excinfo:
        getattr(store, method)("no/such/key", *args)
    assert "'no/such/key'" in str(excinfo.value) and store.url in str(excinfo.value)
    assert not (tmp_path / "out").exists()
    assert not store.exists("no/such/key")
    store.delete("no/such/key")  # not an error


@pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/", "a\\b", "x\x00"])
def test_bad_keys_are_refused_and_nothing_is_written(store, key):
    for call in (
        lambda: store.put_bytes(key, b"x"),
        lambda: store.get_bytes(key),
        lambda: store.info(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
    ):
        with pytest.raises(InvalidKeyError):
            call()
    assert list(store.list()) == []


def test_list_is_sorted_and_bounded_by_segments(store):
    keys = ["b", "a/z", "ab/x", "a/b/c", "a-b", "a", "\u00e9", "A"]
    for key in keys:
        store.put_bytes(key, key.encode())
    assert list(store.list()) == sorted(keys)
    assert list(store.list("a")) == ["a/b/c", "a/z"]
    assert list(store.list("a/b/")) == ["a/b/c"]
    assert list(store.list("none")) == []


def test_list_objects_gives_each_key_its_size_and_last_write(store):
    before = time.time()
    for key, data in (("a/b", b"12345"), ("a/c", b""), ("z", b"xy")):
        store.put_bytes(key, data)
    listed = list(store.list_objects("a"))
    assert [(o.key, o.size) for o in listed] == [("a/b", 5), ("a/c", 0)]
    assert all(before - 1 <= o.modified <= time.time() for o in listed)  # S3: whole seconds
    assert [o.key for o in store.list_objects()] == list(store.list())
    with pytest.raises(InvalidKeyError):
        store.list_objects("../")  # checked at the call, not at the first item


def test_delete_removes_the_key(store):
    store.put_bytes("gone", b"x")
    store.put_bytes("kept", b"y")
    store.delete("gone")
    assert not store.exists("gone")
    assert list(store.list()) == ["kept"]
    with pytest.raises(ObjectNotFoundError):
        store.get_bytes("gone")


def test_a_store_survives_pickling_for_workers(store):
    store.put_bytes("k", b"shipped")
    copy = pickle.loads(pickle.dumps(store))
    assert copy.url == store.url
    assert copy.get_bytes("k") == b"shipped"


# -- S3 only ----------------------------------------------------------------------------


def test_objects_live_under_the_prefix_with_sha256_metadata(s3_store, s3_client, bucket):
    s3_store.put_bytes("x/y", b"data")
    head = s3_client.head_object(Bucket=bucket, Key=f"{PREFIX}/x/y", ChecksumMode="ENABLED")
    assert head["Metadata"] == {"sha256": sha(b"data")}
    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"data").digest()).decode()
    assert s3_store.url == f"s3://{bucket}/{PREFIX}"


def test_put_file_above_the_threshold_is_a_multipart_upload(s3_store, s3_client, bucket, tmp_path):
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(MULTIPART_BYTES))
    s3_store.put_file("big", source)
    head = s3_client.head_object(Bucket=bucket, Key=f"{PREFIX}/big")
    assert head["ETag"].strip('"').endswith("-2")  # two parts
    assert head["Metadata"]["sha256"] == sha(source.read_bytes())


def test_list_ignores_objects_outside_the_prefix_and_folder_markers(s3_store, s3_client, bucket):
    s3_store.put_bytes("inside", b"1")
    s3_client.put_object(Bucket=bucket, Key="nevis/other", Body=b"2")
    s3_client.put_object(Bucket=bucket, Key="nevis/testing/x", Body=b"3")
    s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}/folder/", Body=b"")
    assert list(s3_store.list()) == ["inside"]


def test_foreign_object_without_recorded_sha256_is_refused(s3_store, s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key=f"{PREFIX}/foreign", Body=b"from elsewhere")
    assert s3_store.exists("foreign")
    with pytest.raises(DataIntegrityError, match="no recorded sha256"):
        s3_store.get_bytes("foreign")


@pytest.mark.parametrize("operation", ["put_bytes", "get_bytes", "info", "exists", "list"])
def test_missing_bucket_names_the_bucket_and_the_setting(s3_endpoint, operation):
    store = S3ObjectStore("no-such-bucket-here", "p", endpoint_url=s3_endpoint)
    calls = {
        "put_bytes": lambda: store.put_bytes("k", b"x"),
        "get_bytes": lambda: store.get_bytes("k"),
        "info": lambda: store.info("k"),
        "exists": lambda: store.exists("k"),
        "list": lambda: list(store.list()),
    }
    with pytest.raises(ConfigError) as excinfo:
        calls[operation]()
    assert "'no-such-bucket-here'" in str(excinfo.value)
    assert "NEVIS_STORE_URL" in str(excinfo.value)


def test_unreachable_endpoint_names_the_endpoint_setting():
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",  # discard port: nothing listens
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=2),
    )
    store = S3ObjectStore("bucket", client=client)
    with pytest.raises(ConfigError, match="NEVIS_S3_ENDPOINT_URL"):
        store.get_bytes("k")


def test_a_store_with_a_caller_supplied_client_refuses_pickling(s3_client, bucket):
    store = S3ObjectStore(bucket, client=s3_client)
    with pytest.raises(TypeError, match="endpoint_url"):
        pickle.dumps(store)


def test_open_store_reaches_s3_through_the_endpoint(s3_endpoint, bucket, tmp_path):
    store = open_store(f"s3://{bucket}/via/url", s3_endpoint_url=s3_endpoint)
    store.put_bytes("k", b"through the factory")
    assert store.get_bytes("k") == b"through the factory"
    assert list(store.list()) == ["k"]
