"""The local-folder object store: round trips, atomic overwrites, corruption, keys, gc."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from services.core.errors import DataIntegrityError, InvalidKeyError, ObjectNotFoundError
from services.store.objects import LocalObjectStore, ObjectInfo, ObjectStore


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "store")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_path(store: LocalObjectStore, data: bytes) -> Path:
    digest = sha(data)
    return store.root / "blobs" / digest[:2] / digest


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_local_store_satisfies_the_protocol(store):
    assert isinstance(store, ObjectStore)
    assert store.url == store.root.as_uri()


def test_put_and_get_bytes_round_trip(store):
    info = store.put_bytes("shards/mini/a.npz", b"payload")
    assert info == ObjectInfo(key="shards/mini/a.npz", size=7, sha256=sha(b"payload"))
    assert store.get_bytes("shards/mini/a.npz") == b"payload"
    assert store.info("shards/mini/a.npz") == info
    assert store.verify("shards/mini/a.npz") == info
    assert store.exists("shards/mini/a.npz")
    assert not store.exists("shards/mini/b.npz")


def test_empty_object_round_trips(store):
    assert store.put_bytes("empty", b"").size == 0
    assert store.get_bytes("empty") == b""


def test_put_file_and_get_file_round_trip_large_file(store, tmp_path):
    data = os.urandom(3 * (1 << 20) + 123)  # several read chunks
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    info = store.put_file("ckpt/model.bin", source)
    assert info.sha256 == sha(data) and info.size == len(data)
    target = tmp_path / "out" / "deep" / "model.bin"
    assert store.get_file("ckpt/model.bin", target) == info
    assert target.read_bytes() == data
    assert [p.name for p in target.parent.iterdir()] == ["model.bin"]  # no temp left


def test_overwrite_replaces_bytes_and_checksum(store):
    store.put_bytes("k", b"old")
    info = store.put_bytes("k", b"new and longer")
    assert store.get_bytes("k") == b"new and longer"
    assert store.info("k") == info == ObjectInfo("k", 14, sha(b"new and longer"))
    assert list(store.list()) == ["k"]


def test_a_key_and_keys_below_it_coexist(store):
    # S3 allows both "a" and "a/b"; the local layout must too.
    store.put_bytes("a", b"file")
    store.put_bytes("a/b", b"below")
    store.put_bytes("a.d/c.ref", b"suffix look-alikes")
    assert store.get_bytes("a") == b"file"
    assert store.get_bytes("a/b") == b"below"
    assert store.get_bytes("a.d/c.ref") == b"suffix look-alikes"
    assert list(store.list()) == ["a", "a.d/c.ref", "a/b"]


def failing_chunks(first: bytes):
    yield first
    raise OSError("disk went away midway")


@pytest.mark.parametrize("existing", [True, False])
def test_a_write_that_fails_midway_leaves_the_old_object(store, existing):
    if existing:
        old = store.put_bytes("k", b"old bytes")
    with pytest.raises(OSError, match="midway"):
        store.put_stream("k", failing_chunks(b"new partial bytes"))
    if existing:
        assert store.get_bytes("k") == b"old bytes"
        assert store.info("k") == old
        assert list(store.list()) == ["k"]
    else:
        assert not store.exists("k")
        assert list(store.list()) == []
    assert files_under(store.root / "tmp") == []  # the half-written file is gone
    assert not blob_path(store, b"new partial bytes").exists()


def test_put_file_of_an_unreadable_path_keeps_the_old_object(store, tmp_path):
    store.put_bytes("k", b"old")
    with pytest.raises(DataIntegrityError, match="cannot be read"):
        store.put_file("k", tmp_path / "missing.bin")
    assert store.get_bytes("k") == b"old"


def test_put_bytes_refuses_text(store):
    with pytest.raises(TypeError, match="must be bytes; got str"):
        store.put_bytes("k", "text")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["get_bytes", "verify", "get_file"])
def test_tampered_bytes_are_detected_on_read(store, tmp_path, method):
    info = store.put_bytes("k", b"original")
    blob_path(store, b"original").write_bytes(b"tampered")
    target = tmp_path / "out.bin"
    args = (target,) if method == "get_file" else ()
    with pytest.raises(DataIntegrityError) as excinfo:
        getattr(store, method)("k", *args)
    message = str(excinfo.value)
    assert "'k'" in message and info.sha256 in message and sha(b"tampered") in message
    assert not target.exists()
    assert list(tmp_path.glob(".out.bin*")) == []  # the rejected download is removed


def test_get_file_that_fails_verification_keeps_an_existing_target(store, tmp_path):
    store.put_bytes("k", b"original")
    blob_path(store, b"original").write_bytes(b"truncat")
    target = tmp_path / "out.bin"
    target.write_bytes(b"previous download")
    with pytest.raises(DataIntegrityError, match="corrupted"):
        store.get_file("k", target)
    assert target.read_bytes() == b"previous download"


def test_a_missing_blob_is_an_integrity_error(store):
    store.put_bytes("k", b"bytes")
    blob_path(store, b"bytes").unlink()
    with pytest.raises(DataIntegrityError, match="missing"):
        store.get_bytes("k")


def test_an_unreadable_ref_is_an_integrity_error(store):
    store.put_bytes("dir/k", b"bytes")
    (store.root / "refs" / "dir.d" / "k.ref").write_text("{not json")
    with pytest.raises(DataIntegrityError, match="record of object 'dir/k'"):
        store.info("dir/k")


def test_a_ref_cannot_point_outside_the_blob_folder(store):
    store.put_bytes("k", b"bytes")
    record = {"key": "k", "size": 5, "sha256": "../../../../etc/passwd".ljust(64, "x")}
    (store.root / "refs" / "k.ref").write_text(json.dumps(record))
    with pytest.raises(DataIntegrityError, match="unreadable"):
        store.get_bytes("k")


@pytest.mark.parametrize("method", ["get_bytes", "info", "verify", "get_file"])
def test_missing_key_names_the_key_and_the_store(store, tmp_path, method):
    args = (tmp_path / "out",) if method == "get_file" else ()
    with pytest.raises(ObjectNotFoundError) as excinfo:
        getattr(store, method)("no/such/key", *args)
    assert "'no/such/key'" in str(excinfo.value) and store.url in str(excinfo.value)
    assert not (tmp_path / "out").exists()


def test_delete_of_a_missing_key_is_not_an_error(store):
    store.delete("never/stored")
    assert not store.exists("never/stored")


BAD_KEYS = ["", "/abs", "../up", "a//b", "a/", "a\\b", "nul\x00", "a/./b"]
METHODS = ["put_bytes", "put_file", "get_bytes", "get_file", "info", "exists", "verify", "delete"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("key", BAD_KEYS)
def test_every_method_refuses_bad_keys_before_touching_disk(store, tmp_path, method, key):
    source = tmp_path / "src.bin"
    source.write_bytes(b"x")
    extra = {"put_bytes": (b"x",), "put_file": (source,), "get_file": (tmp_path / "o",)}
    with pytest.raises(InvalidKeyError):
        getattr(store, method)(key, *extra.get(method, ()))
    assert not store.root.exists()


def test_list_is_sorted_and_bounded_by_segments(store):
    keys = ["b", "a/z", "ab/x", "a/b/c", "a-b", "a", "\u00e9", "A"]
    for key in keys:
        store.put_bytes(key, key.encode())
    assert list(store.list()) == sorted(keys)
    assert list(store.list("a")) == ["a/b/c", "a/z"]
    assert list(store.list("a/")) == ["a/b/c", "a/z"]
    assert list(store.list("a/b")) == ["a/b/c"]
    assert list(store.list("nothing/here")) == []
    with pytest.raises(InvalidKeyError, match="prefix '../'"):
        store.list("../")


def test_list_of_an_unused_store_is_empty(tmp_path):
    assert list(LocalObjectStore(tmp_path / "never-written").list()) == []


def test_half_written_files_are_never_listed(store):
    store.put_bytes("dir/real", b"x")
    (store.root / "tmp" / ".k.ref.abc.part").write_bytes(b"{}")
    (store.root / "refs" / "dir.d" / ".stray.ref.xyz.part").write_bytes(b"half")
    (store.root / "refs" / "odd-folder").mkdir()
    (store.root / "refs" / "odd-folder" / "x.ref").write_bytes(b"{}")
    assert list(store.list()) == ["dir/real"]


def test_delete_then_gc_removes_only_unreferenced_blobs(store):
    store.put_bytes("keep", b"shared")
    store.put_bytes("twin", b"shared")
    store.put_bytes("drop/me", b"only here")
    store.delete("drop/me")
    assert not store.exists("drop/me")
    assert list(store.list()) == ["keep", "twin"]
    assert blob_path(store, b"only here").exists()  # delete drops only the ref

    assert store.gc().blobs_removed == 0  # too young by default: a writer may need it
    stats = store.gc(min_age_s=0)
    assert (stats.blobs_removed, stats.bytes_freed) == (1, len(b"only here"))
    assert not blob_path(store, b"only here").exists()
    assert not (store.root / "refs" / "drop.d").exists()  # empty folders pruned
    store.delete("keep")
    assert store.gc(min_age_s=0).blobs_removed == 0  # "twin" still uses the blob
    assert store.get_bytes("twin") == b"shared"


def test_gc_removes_stale_temp_files(store):
    store.put_bytes("k", b"x")
    (store.root / "tmp" / ".blob.crashed.part").write_bytes(b"half")
    assert store.gc(min_age_s=0).temp_files_removed == 1
    assert files_under(store.root / "tmp") == []
    assert store.get_bytes("k") == b"x"


def test_readers_see_whole_objects_while_a_key_is_overwritten(store):
    versions = [bytes([i]) * 65536 for i in range(2)]
    store.put_bytes("hot", versions[0])
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(40):
                store.put_bytes("hot", versions[i % 2])
        except BaseException as exc:  # surfaced below  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    seen = set()
    while thread.is_alive():
        seen.add(store.get_bytes("hot"))
    thread.join()
    assert errors == []
    assert seen <= set(versions) and seen
