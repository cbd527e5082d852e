"""A tiny BIWI Kaggle zip: 24 subjects' RGB frames with pose files (rotation + position),
plus the depth and mask files the reader skips."""

from __future__ import annotations

import math
from pathlib import Path

from pyquaternion import Quaternion

from tests.support.source_fixtures.tiny_archives import image_bytes, write_zip

SUBJECTS = tuple(range(1, 25))  # every subject the stream's rule lists
FRAMES = 5


def write_biwi(folder: Path) -> dict[str, tuple[float, float, float, int]]:
    """Returns (yaw, pitch, roll in degrees as pyquaternion reads them back, subject) per frame."""
    members: dict[str, bytes] = {"faces_0/readme.txt": b"BIWI"}
    expected = {}
    n = 0
    for subject in SUBJECTS:
        for frame in range(FRAMES):
            n += 1
            yaw, pitch, roll = 0.5 * n - 30, 25 - 0.4 * n, ((7 * n) % 20) - 10 + 0.01 * n
            q = (
                Quaternion(axis=[0, 0, 1], degrees=yaw)
                * Quaternion(axis=[0, 1, 0], degrees=pitch)
                * Quaternion(axis=[1, 0, 0], degrees=roll)
            )
            matrix = q.rotation_matrix
            base = f"faces_0/{subject:02d}/frame_{frame:05d}"
            lines = [" ".join(f"{v:.9f}" for v in row) for row in matrix] + ["88.7 -4.08 878.8"]
            members[base + "_pose.txt"] = ("\n".join(lines) + "\n").encode()
            members[base + "_rgb.png"] = image_bytes(16, 12, seed=n)
            members[base + "_depth.bin"] = b"\x00" * 8
            recovered = Quaternion(matrix=matrix, atol=1e-4).yaw_pitch_roll  # what BIWI users get
            expected[base + "_rgb.png"] = (*(math.degrees(a) for a in recovered), subject)
        members[f"faces_0/{subject:02d}/rgb.cal"] = b"calibration"
    members["head_pose_masks/01/frame_00000_depth_mask.png"] = image_bytes(4, 4)
    write_zip(folder / "biwi-kinect-head-pose-database.zip", members)
    assert all(math.isfinite(v) for e in expected.values() for v in e[:3])
    return expected


__all__ = ["FRAMES", "SUBJECTS", "write_biwi"]
