"""Energy of a learner host's work, beside cFLOP: RAPL where the node exposes it, else an estimate.

CPU energy comes from Intel RAPL's counters (``/sys/class/powercap/intel-rapl:N/energy_uj``,
one per CPU package; their sub-zones are parts of the package and are not added again), read
by harness code before and after a call; the counters wrap at ``max_energy_range_uj``. RAPL
counts the whole package, so a call sharing the node with others is charged their share too;
the source says ``rapl``. Where the node has no readable counters (virtual machines, this
repository's CI machine, non-Intel CPUs without the driver) the energy is an **estimate**,
labelled so: CPU-seconds × :data:`CPU_WATTS` (a busy server core's share of its package power)
/ 3.6e6 J per kWh. GPU energy is NVML's counter (:mod:`workers.sandbox.gpu_usage`), added where
there is one (``+nvml``). Nothing here is faked: no CPU time and no counter gives ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
CPU_WATTS = 10.0
"""Watts per busy CPU core in the estimate (a 200 W, 20-core server package, all cores busy)."""
JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class RaplZone:
    """One package counter: where it is and where it wraps."""

    energy: Path
    wraps_at: int


def rapl_zones(root: Path = POWERCAP) -> list[RaplZone]:
    """The readable package counters under ``root`` (``intel-rapl:N``, not ``intel-rapl:N:M``)."""
    zones = []
    for folder in sorted(root.glob("intel-rapl:*")):
        if folder.name.count(":") != 1 or not (folder / "energy_uj").exists():
            continue
        try:
            int((folder / "energy_uj").read_text())
            wraps = int((folder / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            continue  # unreadable (root-only since 2020 kernels): no counter, the estimate is used
        zones.append(RaplZone(folder / "energy_uj", wraps))
    return zones


class RaplWindow:
    """The package energy between :meth:`start` and :meth:`joules` (``None`` without counters)."""

    def __init__(self, root: Path = POWERCAP) -> None:
        self.zones = rapl_zones(root)
        self._start: list[int | None] = []

    def start(self) -> RaplWindow:
        self._start = [_read(z) for z in self.zones]
        return self

    def joules(self) -> float | None:
        if not self.zones or not self._start:
            return None
        total = 0
        for zone, before in zip(self.zones, self._start, strict=True):
            after = _read(zone)
            if before is None or after is None:
                return None
            total += after - before if after >= before else zone.wraps_at - before + after
        return total / 1e6


def _read(zone: RaplZone) -> int | None:
    try:
        return int(zone.energy.read_text())
    except (OSError, ValueError):
        return None


def energy_fields(cpu_seconds: float | None, rapl_j: float | None, gpu_energy_j: float | None) -> dict[str, Any]:
    """``energy_kwh`` and ``energy_source`` of one call: RAPL's joules, else the estimate from
    CPU-seconds, plus the GPUs' (NVML) where measured; both ``None`` where nothing could be had."""
    if rapl_j is not None:
        joules, source = rapl_j, "rapl"
    elif cpu_seconds is not None:
        joules, source = cpu_seconds * CPU_WATTS, "estimate"
    else:
        return {"energy_kwh": None, "energy_source": None}
    if gpu_energy_j is not None:
        joules, source = joules + gpu_energy_j, f"{source}+nvml"
    return {"energy_kwh": joules / JOULES_PER_KWH, "energy_source": source}


__all__ = ["CPU_WATTS", "JOULES_PER_KWH", "POWERCAP", "RaplWindow", "RaplZone", "energy_fields", "rapl_zones"]
