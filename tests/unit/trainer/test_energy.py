"""Energy beside cFLOP: RAPL counters read as files, else an estimate labelled as one (issue 46)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.store.runs.gpu_energy import combined_source, energy_text, gpu_text
from workers.trainer.energy import CPU_WATTS, JOULES_PER_KWH, RaplWindow, energy_fields, rapl_zones


def _zone(root: Path, name: str, energy_uj: int, wraps_at: int = 262_143_328_850) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "energy_uj").write_text(f"{energy_uj}\n")
    (folder / "max_energy_range_uj").write_text(f"{wraps_at}\n")
    return folder


def test_a_fake_powercap_folder_gives_the_packages_energy_delta_with_wraparound(tmp_path):
    package0 = _zone(tmp_path, "intel-rapl:0", 5_000_000)
    _zone(tmp_path, "intel-rapl:0:0", 1_000_000)  # a part of package 0 (its cores): not added again
    package1 = _zone(tmp_path, "intel-rapl:1", 990_000, wraps_at=1_000_000)
    assert [z.energy.parent.name for z in rapl_zones(tmp_path)] == ["intel-rapl:0", "intel-rapl:1"]
    window = RaplWindow(tmp_path).start()
    (package0 / "energy_uj").write_text("7500000\n")  # +2.5 J
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("9000000\n")
    (package1 / "energy_uj").write_text("20000\n")  # wrapped: +10,000 + 20,000 µJ
    assert window.joules() == pytest.approx(2.5 + 0.03)
    fields = energy_fields(cpu_seconds=4.0, rapl_j=window.joules(), gpu_energy_j=None)
    assert fields == {"energy_kwh": pytest.approx(2.53 / JOULES_PER_KWH), "energy_source": "rapl"}


def test_without_counters_the_energy_is_an_estimate_and_says_so(tmp_path):
    assert RaplWindow(tmp_path / "absent").start().joules() is None
    fields = energy_fields(cpu_seconds=36.0, rapl_j=None, gpu_energy_j=None)
    assert fields == {"energy_kwh": pytest.approx(36.0 * CPU_WATTS / JOULES_PER_KWH), "energy_source": "estimate"}
    assert energy_fields(None, None, None) == {"energy_kwh": None, "energy_source": None}  # nothing to go on
    assert energy_fields(1.0, None, 7200.0)["energy_source"] == "estimate+nvml"
    assert energy_text(fields["energy_kwh"], "estimate").startswith("~")


def test_a_sum_is_as_measured_as_its_least_measured_part_and_no_gpu_is_not_zero():
    assert combined_source(["rapl", "estimate", None]) == "estimate"
    assert combined_source(["rapl+nvml", "rapl"]) == "rapl+nvml" and combined_source([None]) is None
    assert gpu_text(None, "no GPU: the host was given none") == "no GPU"
    assert gpu_text(None, "no GPU time measured: nvidia-ml-py (NVML) is not installed on this node") == "unmeasured"
    assert gpu_text(7200.0, None) == "2 GPU-h"
