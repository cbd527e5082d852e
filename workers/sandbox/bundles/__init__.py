"""Uploaded learner bundles: a wheel, a zip or a gzipped tar of Python sources, checked on
upload and unpacked on a worker, never trusted (issue 45 item 1: the sandbox by concern).

The entry points (:mod:`workers.sandbox.bundles.upload`) are named here; the archive readers
(:mod:`.archives`, :mod:`.gzip_stream`), the caps and layout (:mod:`.limits`) and the one pass
behind both check and unpack (:mod:`.unpack`) are its parts.
"""

from workers.sandbox.bundles.upload import (
    DEFAULT_MAX_UNPACKED_BYTES,
    UNPACK_FACTOR,
    bundle_kind,
    check_bundle,
    extract_bundle,
    import_root,
    safe_filename,
    unpack_stored_bundle,
)

__all__ = [
    "DEFAULT_MAX_UNPACKED_BYTES",
    "UNPACK_FACTOR",
    "bundle_kind",
    "check_bundle",
    "extract_bundle",
    "import_root",
    "safe_filename",
    "unpack_stored_bundle",
]
