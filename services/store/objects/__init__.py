"""The object store: one interface, a local-folder and an S3 backend.

Open the configured store with :func:`store_from_settings` (or :func:`open_store` for a URL).
Every backend writes atomically, records each object's sha256 and verifies it on read, and
accepts only keys that :func:`validate_key` allows. See ``base.py`` for the contract.
"""

from services.store.objects.base import ListedObject, ObjectInfo, ObjectStore
from services.store.objects.factory import open_store, store_from_settings
from services.store.objects.keys import validate_key, validate_prefix
from services.store.objects.local import GcStats, LocalObjectStore

__all__ = [
    "GcStats",
    "ListedObject",
    "LocalObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "S3ObjectStore",
    "open_store",
    "store_from_settings",
    "validate_key",
    "validate_prefix",
]


def __getattr__(name: str) -> type:
    # boto3 takes a while to import; load the S3 backend only when someone asks for it.
    if name == "S3ObjectStore":
        from services.store.objects.s3 import S3ObjectStore  # noqa: PLC0415 - see above

        return S3ObjectStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
