"""Write the ``nevis22-*-reference`` stream variants beside their parents.

Each variant is its parent (``nevis22-full``, ``nevis22-short``) with every task whose source
the reference prepares into its own data folder reading the reference's split of each row
(:mod:`workers.ingest.reference_streams`). Run it after a parent manifest or the source
catalogue changes; ``tests/unit/ingest/test_reference_streams.py`` fails while they are stale.

Usage::

    .venv/bin/python scripts/build_reference_streams.py            # write the two variants
    .venv/bin/python scripts/build_reference_streams.py --check    # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workers.ingest.reference_streams import PARENTS, reference_variant, render
from workers.stream.manifest_files import load_stream
from workers.stream.sources.catalogue import load_catalogue

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "workers" / "stream" / "manifests"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="manifests folder")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = []
    for parent in PARENTS:
        variant = reference_variant(load_stream(parent), load_catalogue())
        path = args.out / f"{variant.name}.json"
        text = render(variant)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}: {len(variant.tasks)} tasks")
    if stale:
        print(f"stale (re-run without --check): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
