"""GPU time, peak GPU memory and energy of a learner host's processes, read through NVML.

The CPU-second floor sees almost nothing of a learner that patches its meter and computes with
raw tensors on a GPU. NVML (``nvidia-ml-py``, imported only where installed) is read by harness
code, outside the sandbox: the driver's per-process utilisation samples
(``nvmlDeviceGetProcessUtilization``: the share of the device's SMs a process kept busy) turn
into GPU-seconds, the processes' used memory into a peak, and the devices' energy counters
(``nvmlDeviceGetTotalEnergyConsumption``, device-wide: a device shared with another trial is
counted whole) into joules. A :class:`GpuWatch` polls while a call runs. Where NVML cannot be
loaded (no package, no driver: this repository's CI machine) nothing is faked: the fields are
``None`` and ``gpu_note`` says why.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

POLL_S = 0.5


class GpuSource(Protocol):
    """What :class:`GpuWatch` reads of the machine's GPUs (NVML's calls, one device at a time)."""

    def devices(self) -> list[Any]: ...

    def utilisation(self, device: Any, since_us: int) -> list[tuple[int, int, float]]:
        """``(pid, timestamp_us, sm_percent)`` samples newer than ``since_us``."""
        ...

    def memory(self, device: Any) -> dict[int, int]:
        """Used GPU memory in bytes per process on the device."""
        ...

    def energy_mj(self, device: Any) -> int | None:
        """The device's energy counter since the driver loaded, in millijoules."""
        ...


@dataclass(frozen=True)
class GpuUsage:
    """What the host's processes used of the GPUs during one call; ``None`` where unknown."""

    gpu_seconds: float | None
    gpu_peak_memory_bytes: int | None
    gpu_energy_j: float | None
    gpu_note: str | None  # why the figures are absent (or what they do not cover)

    def fields(self) -> dict[str, Any]:
        return {
            "gpu_seconds": self.gpu_seconds,
            "gpu_peak_memory_bytes": self.gpu_peak_memory_bytes,
            "gpu_energy_j": self.gpu_energy_j,
            "gpu_note": self.gpu_note,
        }


def absent(reason: str) -> GpuUsage:
    return GpuUsage(None, None, None, reason)


@dataclass
class _Tally:
    """GPU-seconds and peak memory so far, from samples (pure arithmetic: unit-tested)."""

    seconds: float = 0.0
    peak_bytes: int = 0
    last_us: dict[int, int] = field(default_factory=dict)  # per device index: the newest sample seen
    used: set[int] = field(default_factory=set)  # device indices the host's processes appeared on

    def add(self, index: int, samples: Iterable[tuple[int, int, float]], pids: set[int], period_s: float) -> None:
        """Count ``period_s`` of the device at the busiest share the host's processes kept
        (their SM percentages summed per sample time, at most 100)."""
        by_time: dict[int, float] = {}
        for pid, stamp, percent in samples:
            self.last_us[index] = max(self.last_us.get(index, 0), int(stamp))
            if pid in pids:
                by_time[stamp] = by_time.get(stamp, 0.0) + max(float(percent), 0.0)
        if by_time:
            self.used.add(index)
            busy = sum(min(p, 100.0) for p in by_time.values()) / len(by_time) / 100.0
            self.seconds += busy * period_s

    def memory(self, index: int, per_pid: dict[int, int], pids: set[int]) -> None:
        held = sum(int(b) for pid, b in per_pid.items() if pid in pids)
        if held:
            self.used.add(index)
        self.peak_bytes = max(self.peak_bytes, held)


class GpuWatch:
    """Polls ``source`` for the processes ``pids()`` names while a call runs (:meth:`__enter__`
    to :meth:`__exit__`); :attr:`usage` holds the result after."""

    def __init__(self, source: GpuSource, pids: Callable[[], set[int]], *, poll_s: float = POLL_S) -> None:
        self.source, self.pids, self.poll_s = source, pids, poll_s
        self.usage: GpuUsage | None = None
        self._tally = _Tally()
        self._stop = threading.Event()
        self._devices = list(source.devices())
        self._energy0 = [source.energy_mj(d) for d in self._devices]
        self._thread = threading.Thread(target=self._run, name="nevis-gpu-watch", daemon=True)
        self._last = time.monotonic()

    def __enter__(self) -> GpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._tick()
        energy = [(self.source.energy_mj(d), e0) for d, e0 in zip(self._devices, self._energy0, strict=True)]
        joules = sum(
            (e1 - e0) / 1000.0
            for i, (e1, e0) in enumerate(energy)
            if i in self._tally.used and e1 is not None and e0 is not None
        )
        self.usage = GpuUsage(
            self._tally.seconds,
            self._tally.peak_bytes,
            joules,
            "energy is the devices' whole, shared or not" if self._tally.used else None,
        )

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._tick()

    def _tick(self) -> None:
        now = time.monotonic()
        period, self._last = now - self._last, now
        try:
            pids = self.pids()
            for index, device in enumerate(self._devices):
                since = self._tally.last_us.get(index, 0)
                self._tally.add(index, self.source.utilisation(device, since), pids, period)
                self._tally.memory(index, self.source.memory(device), pids)
        except Exception:  # noqa: BLE001 - a process gone between two reads: the next tick counts
            pass


class NvmlSource:
    """:class:`GpuSource` through ``pynvml`` (the ``nvidia-ml-py`` package)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def devices(self) -> list[Any]:
        return [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.nvml.nvmlDeviceGetCount())]

    def utilisation(self, device: Any, since_us: int) -> list[tuple[int, int, float]]:
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(device, since_us)
        except self.nvml.NVMLError:  # NVML_ERROR_NOT_FOUND: no sample since then
            return []
        return [(int(s.pid), int(s.timeStamp), float(s.smUtil)) for s in samples]

    def memory(self, device: Any) -> dict[int, int]:
        return {int(p.pid): int(p.usedGpuMemory or 0) for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(device)}

    def energy_mj(self, device: Any) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(device))
        except self.nvml.NVMLError:  # older than Volta
            return None


@contextmanager
def watched(pids: Callable[[], set[int]], *, gpu: bool) -> Iterator[_Holder]:
    """Watch the GPU use of ``pids()`` while the block runs; ``.usage`` holds it after (absent,
    with why, for a host given no GPU or a node without NVML)."""
    holder = _Holder(absent("no GPU: the host was given none"))
    source, why = open_source() if gpu else (None, "")
    if gpu and source is None:
        holder.usage = absent(why)
    if source is None:
        yield holder
        return
    watch = GpuWatch(source, pids)
    try:
        with watch:
            yield holder
    finally:
        holder.usage = watch.usage or absent("no GPU time measured: the watch did not finish")


@dataclass
class _Holder:
    usage: GpuUsage


def open_source() -> tuple[GpuSource | None, str]:
    """NVML, or ``None`` and why not (no ``nvidia-ml-py``, no driver, no device)."""
    try:
        import pynvml  # type: ignore[import-not-found]  # noqa: PLC0415 - optional: GPU nodes only
    except ImportError:
        return None, "no GPU time measured: nvidia-ml-py (NVML) is not installed on this node"
    try:
        pynvml.nvmlInit()
        source = NvmlSource(pynvml)
        if not source.devices():
            return None, "no GPU time measured: NVML sees no device on this node"
    except Exception as exc:  # noqa: BLE001 - NVMLError: no driver, no library
        return None, f"no GPU time measured: NVML did not load ({exc})"
    return source, ""


__all__ = ["GpuSource", "GpuUsage", "GpuWatch", "NvmlSource", "absent", "open_source", "watched"]
