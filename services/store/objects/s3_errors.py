"""Translate botocore failures into the project's errors, each naming what to fix.

A missing key becomes ObjectNotFoundError; a missing bucket, refused credentials or an
unreachable endpoint becomes a ConfigError naming NEVIS_STORE_URL, the AWS credential
variables or NEVIS_S3_ENDPOINT_URL; any other S3 error a NevisError with S3's code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

from services.core.errors import ConfigError, NevisError, ObjectNotFoundError

# HEAD requests carry no body, so a missing key or bucket is only a bare "404".
NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchBucket"})
DENIED_CODES = frozenset({"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"})


@contextmanager
def translate_s3_errors(*, url: str, bucket: str, key: str | None, bucket_exists: Callable[[], bool]) -> Iterator[None]:
    """Run S3 calls for ``key`` (None for a listing) and translate their failures.

    Args:
        url: The store's URL, for messages.
        bucket: The bucket, for messages.
        key: The object key the calls are about, or None.
        bucket_exists: Asked only to tell a missing key from a missing bucket.
    """
    try:
        yield
    except ClientError as exc:
        code = error_code(exc)
        if code == "NoSuchBucket":
            raise missing_bucket_error(url, bucket) from None
        if code in NOT_FOUND_CODES and key is not None:
            if not bucket_exists():
                raise missing_bucket_error(url, bucket) from None
            raise ObjectNotFoundError(f"No object {key!r} in store {url}.") from None
        if code in DENIED_CODES:
            raise ConfigError(
                f"S3 refused access to bucket {bucket!r} ({code}: {_message(exc)}). Check "
                "the AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or "
                "AWS_PROFILE) and the bucket policy, or change NEVIS_STORE_URL."
            ) from None
        raise NevisError(
            f"S3 request for {key or 'a listing'!r} in store {url} failed ({code}: {_message(exc)})."
        ) from exc
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise ConfigError(
            f"No usable AWS credentials for store {url} ({exc}). Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE."
        ) from None
    except EndpointConnectionError as exc:
        raise ConfigError(
            f"Cannot reach the S3 endpoint for store {url} ({exc}). Check "
            "NEVIS_S3_ENDPOINT_URL and that the server is running."
        ) from None


def missing_bucket_error(url: str, bucket: str) -> ConfigError:
    """The error for a bucket that does not exist."""
    return ConfigError(
        f"S3 bucket {bucket!r} does not exist (store {url}). Create the bucket, or set "
        "NEVIS_STORE_URL to s3://EXISTING-BUCKET/PREFIX."
    )


def error_code(exc: ClientError) -> str:
    """S3's error code (``NoSuchKey``, ``404``, ...) from a botocore ClientError."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def _message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", "")) or "no message"


__all__ = ["DENIED_CODES", "NOT_FOUND_CODES", "error_code", "missing_bucket_error", "translate_s3_errors"]
