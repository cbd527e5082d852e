"""Object-store keys: what is accepted, and that each refusal names the key and the rule."""

from __future__ import annotations

import pytest

from services.core.errors import InvalidKeyError
from services.store.objects.keys import MAX_KEY_BYTES, MAX_SEGMENT_BYTES, validate_key, validate_prefix


@pytest.mark.parametrize(
    "key",
    [
        "a",
        "shards/mini/digits/train-0000.npz",
        "a.b/c..d/...e",  # dots inside a segment are fine; only '.' and '..' are not
        ".hidden/x",
        "with space/and:colon",
        "unicode/caf\u00e9/\u6570\u636e",
        "x" * MAX_SEGMENT_BYTES,
        "/".join(["y" * 100] * 10) + "/" + "z" * (MAX_KEY_BYTES - 1010),
    ],
)
def test_valid_keys_are_returned_unchanged(key):
    assert validate_key(key) == key


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("", "must not be empty"),
        ("/etc/passwd", "relative path"),
        ("/", "relative path"),
        ("../secrets", "'..' segments"),
        ("a/../../b", "'..' segments"),
        ("a/..", "'..' segments"),
        ("./a", "'.' and '..'"),
        ("a/./b", "'.' and '..'"),
        ("a//b", "empty segments"),
        ("a/b/", "empty segments"),
        ("a\\b", "not '\\'"),
        ("..\\..\\windows", "not '\\'"),
        ("a\x00b", "control characters"),
        ("a\nb", "control characters"),
        ("tab\there", "control characters"),
        ("del\x7f", "control characters"),
        ("k" * (MAX_KEY_BYTES + 1), "at most 1024 bytes"),
        ("\u00e9" * 513, "at most 1024 bytes"),  # 513 chars but 1026 bytes of UTF-8
        ("a/" + "s" * (MAX_SEGMENT_BYTES + 1), "each segment must be at most"),
    ],
)
def test_bad_keys_name_the_key_and_the_rule(key, rule):
    with pytest.raises(InvalidKeyError) as excinfo:
        validate_key(key)
    message = str(excinfo.value)
    assert rule in message
    assert repr(key[:60]) in message


@pytest.mark.parametrize("key", [None, 3, b"bytes/key"])
def test_non_string_keys_are_refused(key):
    with pytest.raises(InvalidKeyError, match="must be a str"):
        validate_key(key)


def test_invalid_key_error_is_a_value_error():
    # Callers that only know the standard library can still catch it.
    with pytest.raises(ValueError):
        validate_key("../x")


@pytest.mark.parametrize(
    ("prefix", "canonical"), [("", ""), ("a", "a/"), ("a/", "a/"), ("shards/mini", "shards/mini/"), ("x/y/", "x/y/")]
)
def test_prefixes_are_canonical_folders(prefix, canonical):
    assert validate_prefix(prefix) == canonical


@pytest.mark.parametrize(
    ("prefix", "rule"),
    [
        ("/", "relative path"),
        ("/abs", "relative path"),
        ("a//", "empty segments"),
        ("../", "'..' segments"),
        ("a/./", "'.' and '..'"),
        ("a\\", "not '\\'"),
        ("a\x00/", "control characters"),
    ],
)
def test_bad_prefixes_name_the_prefix_and_the_rule(prefix, rule):
    with pytest.raises(InvalidKeyError) as excinfo:
        validate_prefix(prefix)
    assert rule in str(excinfo.value)
    assert f"prefix {prefix!r}" in str(excinfo.value)
