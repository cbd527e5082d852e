"""One canonical reading of an Authorization header, shared by authentication and the write
rate limit: a token has exactly one identity however its header is spelled."""

from __future__ import annotations

import pytest

from services.coordinator.common.security import bearer_secret

SECRET = "nvs_" + "x" * 43


@pytest.mark.parametrize(
    "header",
    [
        f"Bearer {SECRET}",
        f"bearer {SECRET}",
        f"BEARER {SECRET}",
        f"bEaReR  {SECRET}",
        f"\tBearer\t{SECRET} ",
        f"  Bearer {SECRET}\t",
    ],
)
def test_spellings_of_one_token_read_as_its_secret(header):
    assert bearer_secret(header) == SECRET


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "   ",
        "Bearer",
        "Bearer ",
        SECRET,
        f"Basic {SECRET}",
        f"Bearer {SECRET} extra",
        f"Bearer{SECRET}",
        f"Token {SECRET}",
    ],
)
def test_anything_else_reads_as_no_token(header):
    assert bearer_secret(header) is None
