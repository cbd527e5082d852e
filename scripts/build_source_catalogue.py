"""One-time converter: ``../shared/streams/nevis22_sources.json`` -> the fetch catalogue.

Writes ``workers/stream/sources/catalogue.json``, shipped as package data, so that the
service (and its tests) never read ``../shared`` for it. Each entry keeps what fetching
needs: the project's dataset key (the manifest's ``nevis:<key>``), the tasks it serves,
one record per file (name, URL, other URLs of the same bytes, checksum, and its size where
``tfds_file_sizes.tsv`` beside this script knows it),
what it needs (none / kaggle / manual), the Kaggle ref, the archive type, the torchvision
class and the notes that matter when downloading. Everything else in the reference table
(labels, split sources) stays there, for the readers.

File names: the URL's last path segment, except where the URL does not carry one (Google
Drive, SharePoint, Kaggle); those names come from :data:`NAMED` (facts stated in the
table's ``archive`` text or in torchvision's / TFDS's own file lists), and Kaggle files are
``<slug>.zip`` as the Kaggle client saves them.

Usage::

    .venv/bin/python scripts/build_source_catalogue.py            # write the catalogue
    .venv/bin/python scripts/build_source_catalogue.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IN = REPO.parent / "shared" / "streams" / "nevis22_sources.json"
DEFAULT_OUT = REPO / "workers" / "stream" / "sources" / "catalogue.json"
SIZES = Path(__file__).with_name("tfds_file_sizes.tsv")  # sha256 -> bytes, from TFDS checksum files
TASKS_CSV = "nevis22_dm_nevis.csv"  # beside the input: each task's num_classes (dm_nevis)
FORMAT = 1

# Rows per split that TFDS fixes (the split sizes of each builder's dataset_info in
# tensorflow-datasets 4.6.0, which dm_nevis pins), under the names the readers write
# (ImageNet's validation is its test split here; TFDS "validation" is "val").
TFDS_ROWS = {
    "mnist": {"train": 60000, "test": 10000},
    "fashion_mnist": {"train": 60000, "test": 10000},
    "cifar10": {"train": 50000, "test": 10000},
    "cifar100": {"train": 50000, "test": 10000},
    "emnist/balanced": {"train": 112800, "test": 18800},
    "svhn_cropped": {"train": 73257, "test": 26032},
    "stl10": {"train": 5000, "test": 8000},
    "imagenet2012": {"train": 1281167, "test": 50000},
    "oxford_iiit_pet": {"train": 3680, "test": 3669},
    "oxford_flowers102": {"train": 1020, "val": 1020, "test": 6149},
    "dtd": {"train": 1880, "val": 1880, "test": 1880},
    "caltech_birds2011": {"train": 5994, "test": 5794},
    "stanford_dogs": {"train": 12000, "test": 8580},
    "celeb_a": {"train": 162770, "val": 19867, "test": 19962},
    "patch_camelyon": {"train": 262144, "val": 32768, "test": 32768},
    "smallnorb": {"train": 24300, "test": 24300},
}

# Google Drive / SharePoint ids -> the file name the data is known by.
NAMED = {
    "137RyRjvTBkBiIfeYBNZBtViDHQ6_Ewsp": "101_ObjectCategories.tar.gz",
    "1r6o0pSROcV1_VwT4oSjA2FBUSCWGuxLK": "256_ObjectCategories.tar",
    "1hbzc_P1FuxMkcabkgn9ZKinBwW683j45": "CUB_200_2011.tgz",
    "1EamOKGLoTuZdtcVYbHMWNpkn3iAVj8TP": "segmentations.tgz",
    "0B7EVK8r0v71pZjFTYXZWM3FlRnM": "img_align_celeba.zip",
    "0B7EVK8r0v71pY0NSMzRuSXJEVkk": "list_eval_partition.txt",
    "0B7EVK8r0v71pblRyaVFSWGxPY0U": "list_attr_celeba.txt",
    "0B7EVK8r0v71pd0FJY3Blby1HUTQ": "list_landmarks_align_celeba.txt",
    "1p1wjaqpTh_5RHfJu4vUh8JJCdKwYMHCp": "lfwa.zip",
    "0B_tExHiYS-0veklUZHFYT19KYjg": "mnist_m.tar.gz",
    "0B4IapRTv9pJ1WGZVd1VDMmhwdlE": "domain_adaptation_images.tar.gz",
    "1s9NyXpi9bO-UZUvk65WVvEUExNkZ1v9V": "Food-101N_release.zip",
    "13PbHxUofhdJLZzql3TyqL22bQJ3HwDK4": "animal_dataset_v1_c.rar",
    "Eank6osXQgxEqa-1bb0nVsoBc3xO4XDwENc_g0nc6t58BA": "TRANCOS_v3.tar.gz",
}
# Exact sizes in bytes stated by the table (TFDS checksum files); everything else: unknown.
EXACT_SIZE = re.compile(r"\(([\d,]{5,}) bytes")
APPROX_SIZE = re.compile(r"~\s?[\d.]+\s?[KMGT]B")
FETCH_NOTE = re.compile(
    r"url|download|drive|mirror|checksum|kaggle|manual|unused|not checked|sharepoint", re.IGNORECASE
)


def file_name(url: str) -> str:
    """The name a downloaded URL is stored under (and looked up by in a mirror)."""
    if url.startswith("kaggle:"):
        return url.rsplit("/", 1)[-1] + ".zip"
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    ident = (query.get("id") or [""])[0] or parts.path.rstrip("/").rsplit("/", 1)[-1]
    if ident in NAMED:
        return NAMED[ident]
    if "drive.google.com" in parts.netloc:
        return f"gdrive-{ident}"  # the name is unknown: Drive gives it at download time
    name = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if not name or "." not in name:
        raise SystemExit(f"no file name for {url!r}: add it to NAMED")
    return name


def known_sizes(path: Path = SIZES) -> dict[str, int]:
    """``sha256:<hex>`` -> size in bytes, from the checksum files TFDS publishes."""
    rows = (line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {f"sha256:{sha}": int(size) for sha, size, *_ in rows}


def files_of(record: dict[str, Any], sizes: dict[str, int]) -> list[dict[str, Any]]:
    """One record per URL of ``urls``, with the other URLs whose checksum is the same."""
    checksums: dict[str, str] = record["checksums"]
    exact = EXACT_SIZE.search(record["archive"])
    out = []
    for url in record["urls"]:
        checksum = checksums.get(url)
        mirrors = [
            u
            for u, c in checksums.items()
            if checksum is not None and c == checksum and u != url and u not in record["urls"]
        ]
        size = sizes.get(checksum or "")
        if size is None and exact and len(record["urls"]) == 1:
            size = int(exact.group(1).replace(",", ""))
        out.append({"name": file_name(url), "url": url, "mirrors": mirrors, "checksum": checksum, "size": size})
    names = [f["name"] for f in out]
    if len(set(names)) != len(names):
        raise SystemExit(f"{record['key']}: two files share a name: {names}")
    return out


def fetch_notes(record: dict[str, Any], files: list[dict[str, Any]]) -> list[str]:
    """The table's notes that matter for downloading, plus facts from its other fields."""
    notes = [n for n in record.get("notes", []) if FETCH_NOTE.search(n)]
    if any("drive.google.com" in f["url"] for f in files):
        notes.append(
            "Google Drive: large files answer with a confirmation page first; a mirror (NEVIS_DATA_MIRROR) avoids it."
        )
    covered = {f["url"] for f in files} | {m for f in files for m in f["mirrors"]}
    other = [u for u in record.get("urls_tfds_4_9_10", []) if u not in covered]
    if other:
        notes.append("tensorflow-datasets 4.9.10 downloads other files instead: " + ", ".join(other))
    for url in record.get("fallback_urls_in_comments", []):
        notes.append(f"fallback URL named in the reference code's comments: {url}")
    if record.get("torchvision_note"):
        notes.append(f"torchvision: {record['torchvision_note']}")
    return notes


def task_classes(path: Path) -> dict[str, int]:
    """Reference key -> the classes of its tasks, where every task of the source agrees."""
    seen: dict[str, set[str]] = {}
    for row in csv.DictReader(path.open(encoding="utf-8")):
        found = re.search(r"src=(?:[a-z]+:)?([^;]+)", row["notes"])
        if found:
            seen.setdefault(found.group(1).strip(), set()).add(row["num_classes"].strip())
    return {key: int(next(iter(v))) for key, v in seen.items() if len(v) == 1 and next(iter(v)).isdigit()}


def expected_counts(key: str, classes: dict[str, int]) -> dict[str, Any] | None:
    """What the reference or TFDS fixes of a source's size, with where it comes from."""
    out: dict[str, Any] = {}
    if key in classes:
        out["classes"] = classes[key]
    if key in TFDS_ROWS:
        out["rows"] = TFDS_ROWS[key]
    if not out:
        return None
    out["from"] = "; ".join(
        part
        for key_, part in (
            ("classes", "classes: num_classes of every task of the source in dm_nevis"),
            ("rows", "rows: TFDS 4.6.0 split sizes"),
        )
        if key_ in out
    )
    return out


def entry(record: dict[str, Any], sizes: dict[str, int], classes: dict[str, int] | None = None) -> dict[str, Any]:
    """The catalogue entry of one source record."""
    files = files_of(record, sizes)
    approx = APPROX_SIZE.search(record["archive"])
    kaggle = record.get("kaggle")
    return {
        "key": record["key"].replace("/", "_"),
        "reference_key": record["key"],
        "titles": record["dataset_names"],
        "tasks": {"FULL": record["tasks"]["FULL"], "SHORT": record["tasks"]["SHORT"]},
        "needs": record["needs"],
        "kaggle": kaggle["slug"] if kaggle else None,
        "source_kind": record["source_kind"],
        "archive": record["archive"],
        "torchvision": record["torchvision"],
        "requires_tools": record.get("requires_tools", []),
        "approx_size": approx.group(0).replace(" ", "").lstrip("~") if approx else None,
        "files": files,
        "notes": fetch_notes(record, files),
        **({"expected": e} if (e := expected_counts(record["key"], classes or {})) else {}),
    }


def build(records: list[dict[str, Any]], origin: str, classes: dict[str, int] | None = None) -> dict[str, Any]:
    """The whole catalogue document; stops if a task is not covered exactly once."""
    sizes = known_sizes()
    entries = [entry(r, sizes, classes) for r in records]
    for stream, count in (("FULL", 106), ("SHORT", 29)):
        orders = sorted(o for e in entries for o in e["tasks"][stream])
        if orders != list(range(1, count + 1)):
            raise SystemExit(f"{stream}: tasks covered are not exactly 1..{count}")
    return {
        "format": FORMAT,
        "description": "Where each NEVIS'22 source's files come from, one entry per source of the "
        "FULL and SHORT streams. Generated by scripts/build_source_catalogue.py; do not edit.",
        "source": origin,
        "sources": entries,
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_IN)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the catalogue is stale")
    args = parser.parse_args(argv)
    records = json.loads(args.input.read_text())
    origin = (
        "../shared/streams/nevis22_sources.json (facts from google-deepmind/dm_nevis commit "
        "37ccf1e2dd894a13a8a4f6ceb150d2e7599301d0, tensorflow-datasets 4.6.0 / 4.9.10 and "
        "torchvision 0.29.1; see that folder's README)"
    )
    text = render(build(records, origin, task_classes(args.input.with_name(TASKS_CSV))))
    if args.check:
        stale = not args.out.exists() or args.out.read_text() != text
        print("stale" if stale else "up to date")
        return 1 if stale else 0
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(records)} sources)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
