"""The node's FLOP-rate record lives in a folder only the service's user can write (issue 44):
made 0700, and a folder or record anyone else could have written is never read."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from workers.sandbox.harness_dir import NAME, harness_dir
from workers.sandbox.metering.calibration import cached_flop_rate, machine_flop_rate, rate_record_path


def test_the_folder_is_made_0700_and_owned_by_this_user(tmp_path: Path) -> None:
    folder = harness_dir(tmp_path)
    info = os.lstat(folder)
    assert folder == tmp_path / f"{NAME}-{os.getuid()}"
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()


def test_the_rate_is_recorded_there_and_read_back(tmp_path: Path) -> None:
    rate = machine_flop_rate(cache_dir=tmp_path)
    [record] = harness_dir(tmp_path).glob("flop-rate-*.json")
    assert stat.S_IMODE(os.lstat(record).st_mode) & 0o022 == 0
    assert cached_flop_rate(cache_dir=tmp_path) == rate > 0


def _planted(tmp_path: Path, folder_mode: int) -> Path:
    record = rate_record_path(tmp_path)
    record.write_text(json.dumps({"flops_per_cpu_second": 1.0}))
    os.chmod(record.parent, folder_mode)
    return record


def test_a_folder_others_may_write_is_not_used(tmp_path: Path) -> None:
    """A planted record (a rate of 1 FLOP/s would make no floor bite) in a world-writable folder."""
    _planted(tmp_path, 0o777)
    assert harness_dir(tmp_path) is None
    assert cached_flop_rate(cache_dir=tmp_path) is None
    assert machine_flop_rate(cache_dir=tmp_path) > 1e6  # measured, not read


def test_a_record_others_may_write_is_not_read(tmp_path: Path) -> None:
    record = _planted(tmp_path, 0o700)
    os.chmod(record, 0o666)
    assert cached_flop_rate(cache_dir=tmp_path) is None
    os.chmod(record, 0o600)
    assert cached_flop_rate(cache_dir=tmp_path) == 1.0  # the same record, this user's alone: read


def test_a_linked_folder_is_not_used(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / f"{NAME}-{os.getuid()}").symlink_to(elsewhere)
    assert harness_dir(tmp_path) is None
