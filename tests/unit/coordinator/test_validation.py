"""Strict checks of names, image references, entry points, resources and keys."""

from __future__ import annotations

import pytest

from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.validation import (
    ResourceRequest,
    check_code_url,
    check_entrypoint,
    check_idempotency_key,
    check_image_ref,
    check_name,
    check_resources,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "ref",
    [
        "ghcr.io/team/learner:1.0",
        "learner:v2",
        "docker.io/library/python:3.11-slim",
        "localhost:5000/a/b:rc1",
        f"registry.example.com/x@{DIGEST}",
        f"x:1@{DIGEST}",
        "my-registry.io:443/deep/path/name_with__double:tag.with-dots",
        "[::1]:5000/img:1",
    ],
)
def test_valid_image_references(ref):
    assert check_image_ref(ref) == ref


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("learner", "pinned"),
        ("learner:latest", "pinned"),
        ("Team/learner:1", "container image"),
        ("ghcr.io/team/learner:", "container image"),
        ("a b:1", "container image"),
        ("learner:1@sha256:abc", "container image"),
        ("learner:" + "x" * 129, "container image"),
        ("-lead/x:1", "container image"),
        ("", "container image"),
        ("a" * 300 + ":1", "255"),
    ],
)
def test_invalid_image_references_name_the_field(ref, words):
    with pytest.raises(InvalidInputError, match=words) as caught:
        check_image_ref(ref)
    assert caught.value.field == "image"


@pytest.mark.parametrize("spec", ["pkg:make", "pkg.sub.mod:Factory", "m:outer.inner", "_x:_y"])
def test_valid_entrypoints(spec):
    assert check_entrypoint(spec) == spec


@pytest.mark.parametrize(
    "spec", ["pkg", "pkg:", ":make", "a:b:c", "my-pkg:x", "1pkg:x", "pkg:class", "pkg.:x", "päckage:x", "pkg:x y"]
)
def test_invalid_entrypoints(spec):
    with pytest.raises(InvalidInputError, match="package.module:factory") as caught:
        check_entrypoint(spec)
    assert caught.value.field == "entrypoint"


@pytest.mark.parametrize(
    "spec",
    [
        "os:system",
        "os.path:join",
        "sys:exit",
        "subprocess:run",
        "builtins:eval",
        "shutil:rmtree",
        "importlib:import_module",
        "importlib.util:spec_from_file_location",
        "pickle:loads",
        "socket:socket",
        "ctypes:CDLL",
        "pkg:make.__globals__",
        "pkg:__builtins__",
    ],
)
def test_entrypoints_of_dangerous_modules_or_dunders_are_refused(spec):
    with pytest.raises(InvalidInputError, match="package.module:factory") as caught:
        check_entrypoint(spec)
    assert caught.value.field == "entrypoint"


@pytest.mark.parametrize("spec", ["ospkg:make", "my_os:make", "pkg.os:make", "pkg._private:_make"])
def test_entrypoints_that_only_resemble_dangerous_ones_are_fine(spec):
    assert check_entrypoint(spec) == spec


def test_messages_echo_at_most_a_few_hundred_characters():
    for check, value in ((check_name, "x" * 10**6), (check_image_ref, "Bad " * 10**5), (check_entrypoint, "a" * 10**6)):
        with pytest.raises(InvalidInputError) as caught:
            check(value)
        assert len(str(caught.value)) < 600 and "characters" in str(caught.value)


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 101, "sp ace", None])
def test_invalid_names(name):
    with pytest.raises(InvalidInputError, match="'name'"):
        check_name(name)


def test_resources_default_and_range():
    assert check_resources(None).to_dict() == {"cpus": 1.0, "gpus": 0, "memory_mb": 2048}
    assert check_resources({"cpus": 0.5, "gpus": 2}).to_dict() == {"cpus": 0.5, "gpus": 2, "memory_mb": 2048}


@pytest.mark.parametrize(
    ("stored", "request_"),
    [
        (None, ResourceRequest()),
        ({"cpus": 2.0, "gpus": 1, "memory_mb": 4096}, ResourceRequest(cpus=2.0, gpus=1, memory_mb=4096)),
        # the declared per-trial form a `nevis run` stores: the job needs every worker, and whole GPUs
        (
            {"num_workers": 1, "cpus_per_worker": 1.0, "gpus_per_worker": 0.25, "gpu_optional": True},
            ResourceRequest(cpus=1.0, gpus=1),
        ),
        ({"num_workers": 2, "cpus_per_worker": 3.0, "gpus_per_worker": 0.5}, ResourceRequest(cpus=6.0, gpus=1)),
        ({"num_workers": 2, "cpus_per_worker": 1.0, "gpus_per_worker": 1.0}, ResourceRequest(cpus=2.0, gpus=2)),
        ({"num_workers": 1, "cpus_per_worker": 1.0, "gpus_per_worker": 0.0}, ResourceRequest(cpus=1.0, gpus=0)),
    ],
)
def test_stored_resources_become_one_tasks_request(stored, request_):
    assert ResourceRequest.stored(stored) == request_


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"cpus": 0}, "resources.cpus"),
        ({"cpus": float("nan")}, "resources.cpus"),
        ({"cpus": True}, "resources.cpus"),
        ({"gpus": 1.5}, "resources.gpus"),
        ({"gpus": -1}, "resources.gpus"),
        ({"memory_mb": 10}, "resources.memory_mb"),
        ({"tpus": 1}, "resources.tpus"),
        ([1], "resources"),
    ],
)
def test_bad_resources_name_the_field(data, field):
    with pytest.raises(InvalidInputError) as caught:
        check_resources(data)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("key", "ok"),
    [("a", True), ("run-2025-01-01/7", True), ("", False), ("has space", False), ("é", False), ("x" * 201, False)],
)
def test_idempotency_keys(key, ok):
    if ok:
        assert check_idempotency_key(key) == key
    else:
        with pytest.raises(InvalidInputError):
            check_idempotency_key(key)


def test_coordinator_errors_survive_pickling():
    import pickle

    from services.coordinator.common.client_errors import QuotaExceededError

    error = pickle.loads(pickle.dumps(QuotaExceededError("slow down", field="quota.daily", retry_after_s=9)))
    assert (str(error), error.field, error.retry_after_s) == ("slow down", "quota.daily", 9)
    copied = pickle.loads(pickle.dumps(InvalidInputError("bad", field="x")))
    assert (str(copied), copied.field) == ("bad", "x")


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/me/learner",
        "https://gitlab.example.org:8443/a/b?ref=v1#L3",
        "https://zenodo.org/records/123",
    ],
)
def test_valid_code_urls(url):
    assert check_code_url(url) == url


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://github.com/me/x", "an https:// URL"),
        ("javascript:alert(1)//https://", "an https:// URL"),
        ("github.com/me/x", "an https:// URL"),
        ("https://u:p@github.com/x", "without a user name"),
        ("https://github.com/a b", "without spaces"),
        ("https://github.com/\u00e9", "printable ASCII"),
        ("https://localhost/x", "host name"),
        ("https:///x", "host name"),
        ("https://github.com:99999/x", "host name"),
        ("https://[github.com/x", "host name"),
        ("https://" + "a" * 600 + ".com", "at most 500"),
        ("", "at most 500"),
    ],
)
def test_invalid_code_urls_name_the_field(url, words):
    with pytest.raises(InvalidInputError, match=words) as caught:
        check_code_url(url)
    assert caught.value.field == "code_url"
