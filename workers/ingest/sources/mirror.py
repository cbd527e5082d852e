"""Fill an S3 mirror from the local data folder (``nevis data mirror --to s3://...``).

The mirror has the data folder's layout, ``<prefix>/<source key>/<file name>``, which is what
``NEVIS_DATA_MIRROR`` is read with; a machine with internet fills it once, a cluster without
internet fetches from it. Only files a fetch verified are uploaded, each with its sha256 as
object metadata; an object of the same size is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.ingest.sources.locations import local_path, relative_name, split_s3
from workers.ingest.sources.verify import FetchState
from workers.stream.sources.catalogue import Source

UPLOADED, THERE, MISSING = "uploaded", "already in the mirror", "not fetched here"


@dataclass(frozen=True)
class MirrorRow:
    key: str
    name: str
    status: str
    size: int = 0


def _remote_size(client: Any, bucket: str, key: str) -> int | None:
    try:
        return int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
    except Exception as exc:  # botocore ClientError: 404 means not there yet
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def upload_to_mirror(
    sources: Sequence[Source],
    dest: Path,
    target: str,
    client: Any,
    *,
    on_file: Callable[[MirrorRow], None] = lambda row: None,
) -> list[MirrorRow]:
    """Upload every verified file of ``sources`` under ``dest`` to ``target`` (s3://bucket/prefix)."""
    bucket, prefix = split_s3(target)
    state = FetchState(dest)
    rows: list[MirrorRow] = []
    for source in sources:
        for file in source.files:
            path, rel = local_path(dest, source, file), relative_name(source, file)
            sha = state.recorded_sha256(rel)
            if not path.is_file() or sha is None or not state.unchanged(rel, path):
                row = MirrorRow(source.key, file.name, MISSING)
            else:
                key = f"{prefix}/{rel}" if prefix else rel
                size = path.stat().st_size
                if _remote_size(client, bucket, key) == size:
                    row = MirrorRow(source.key, file.name, THERE, size)
                else:
                    client.upload_file(str(path), bucket, key, ExtraArgs={"Metadata": {"sha256": sha}})
                    row = MirrorRow(source.key, file.name, UPLOADED, size)
            on_file(row)
            rows.append(row)
    return rows


__all__ = ["MISSING", "THERE", "UPLOADED", "MirrorRow", "upload_to_mirror"]
