"""A tiny DomainNet: six domain zips and their train / test lists."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_zip

CLASSES = ("aircraft_carrier", "airplane", "zebra")
DOMAINS = ("real", "painting", "clipart", "quickdraw", "infograph", "sketch")


def write_domainnet(folder: Path) -> dict[str, tuple[str, str, str]]:
    expected = {}
    seed = 0
    for domain in DOMAINS:
        members: dict[str, bytes] = {}
        lists: dict[str, list[str]] = {"train": [], "test": []}
        for label, cls in enumerate(CLASSES):
            for part in ("train", "test", None):
                seed += 1
                rel = f"{domain}/{cls}/{domain}_{label:03d}_{seed:06d}.jpg"
                members[rel] = image_bytes(20 + seed % 9, 18, seed=seed, fmt="JPEG")
                if part is not None:  # the cleaned lists leave some images out
                    lists[part].append(f"{rel} {label}")
                    expected[rel] = (cls, part, domain)
        write_zip(folder / f"{domain}.zip", members)
        for part, lines in lists.items():
            (folder / f"{domain}_{part}.txt").write_text("\n".join(lines) + "\n")
    return expected


__all__ = ["CLASSES", "write_domainnet"]
