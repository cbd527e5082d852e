"""Fixture for Extended Yale B: a zip of subject folders of PGMs, with .info and Ambient files."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_zip

POSES = ("P00", "P01", "P02", "P03", "P04", "P05", "P06", "P07", "P08")


def write_extended_yaleb(data_dir: Path) -> list[tuple[str, str]]:
    """Two subjects in every pose; returns (subject, pose) per row in zip name order."""
    members, rows = {}, []
    for s, subject in enumerate(("yaleB39", "yaleB11")):
        members[f"ExtendedYaleB/{subject}/{subject}_P00.info"] = b"list\n"
        members[f"ExtendedYaleB/{subject}/{subject}_P00_Ambient.pgm"] = encoded(99, "PPM", 5, 4, 1)
        for p, pose in enumerate(POSES):
            name = f"ExtendedYaleB/{subject}/{subject}_{pose}A+070E-35.pgm"
            members[name] = encoded(10 * s + p, "PPM", 5, 4, 1)
            rows.append((name, subject, pose))
    write_zip(source_dir(data_dir, "extended_yaleb") / "extended-yale-dataset-b.zip", members)
    return [(subject, pose) for _, subject, pose in sorted(rows)]


__all__ = ["POSES", "write_extended_yaleb"]
