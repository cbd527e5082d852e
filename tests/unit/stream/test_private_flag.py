"""The private-stream flag of a manifest (issue 44, "private streams"): absent for a public
stream (its document, hence its hash, unchanged), ``true`` kept through a round trip, anything
but a boolean refused naming the field."""

from __future__ import annotations

import pytest

from services.core.errors import ManifestError
from tests.unit.stream.test_manifest import valid_doc
from workers.stream.manifest import manifest_to_dict, parse_manifest


def test_a_public_stream_has_no_flag_and_a_private_one_keeps_it() -> None:
    public = parse_manifest(valid_doc())
    assert public.private is False and "private" not in manifest_to_dict(public)
    private = parse_manifest({**valid_doc(), "private": True})
    assert private.private is True
    assert parse_manifest(manifest_to_dict(private)) == private


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_flag_that_is_not_a_boolean_is_refused(value) -> None:
    with pytest.raises(ManifestError, match="'private' field must be true"):
        parse_manifest({**valid_doc(), "private": value})
