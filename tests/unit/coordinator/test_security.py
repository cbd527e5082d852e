"""API tokens: made random, stored as a hash, shown by a short prefix."""

from __future__ import annotations

from services.coordinator.common import security


def test_tokens_are_random_and_stored_as_their_sha256():
    first, second = security.new_token(), security.new_token()
    assert first.secret != second.secret and first.secret.startswith("nvs_")
    assert first.sha256 == security.hash_token(first.secret) and len(first.sha256) == 64
    assert first.secret not in first.sha256
    assert first.prefix == first.secret[:12] and security.looks_like_token(first.secret)


def test_token_shape_check():
    assert not security.looks_like_token("Basic abc")
    assert not security.looks_like_token("nvs_short")
    assert not security.looks_like_token("nvs_" + "é" * 40)
