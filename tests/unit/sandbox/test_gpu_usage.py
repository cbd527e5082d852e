"""GPU time measured where the learner cannot reach, and the floor's GPU term.

This machine has no NVIDIA driver, so NVML cannot exist here: the arithmetic of
:class:`GpuWatch` is tested with a sample source of fixed numbers standing in for NVML (the
only stand-in in these tests), and the real absence is tested as it is: the fields are
``None`` and the note says why. The NVML path itself runs in bench/gpu_checks.sh.
"""

from __future__ import annotations

import os

from workers.sandbox.metering.calibration import (
    ALLOWANCE_S,
    FLOOR_FRACTION,
    GPU_ALLOWANCE_S,
    GPU_FLOOR_FRACTION,
    compute_floor,
)
from workers.sandbox.metering.gpu_usage import GpuWatch, open_source, watched
from workers.sandbox.metering.usage import tree_pids
from workers.trainer.host_usage import usage_fields

HOST, OTHER = 4242, 777


class FixedSamples:
    """Two devices: the host's processes keep device 0's SMs 50% busy (two processes, 30% + 20%)
    and hold 3 GiB there; another trial uses device 1 fully. Energy rises 5 J per read."""

    def __init__(self) -> None:
        self.reads, self.stamp = 0, 0

    def devices(self) -> list[int]:
        return [0, 1]

    def utilisation(self, device: int, since_us: int) -> list[tuple[int, int, float]]:
        self.stamp += 1000
        if device == 0:
            return [(HOST, self.stamp, 30.0), (HOST + 1, self.stamp, 20.0)]
        return [(OTHER, self.stamp, 100.0)]

    def memory(self, device: int) -> dict[int, int]:
        return {HOST: 2 << 30, HOST + 1: 1 << 30} if device == 0 else {OTHER: 8 << 30}

    def energy_mj(self, device: int) -> int:
        self.reads += 1
        return 5000 * self.reads


def test_gpu_seconds_memory_and_energy_are_the_hosts_processes_alone() -> None:
    watch = GpuWatch(FixedSamples(), lambda: {HOST, HOST + 1}, poll_s=0.05)
    with watch:
        import time

        time.sleep(0.5)
    usage = watch.usage
    assert usage is not None and usage.gpu_seconds is not None
    assert 0.2 <= usage.gpu_seconds <= 0.3  # half of ~0.5 s of device 0; none of device 1's
    assert usage.gpu_peak_memory_bytes == 3 << 30
    assert usage.gpu_energy_j is not None and usage.gpu_energy_j > 0  # device 0's counter only
    assert "shared" in (usage.gpu_note or "")


def test_the_floor_gains_a_gpu_term_by_the_cpu_rule() -> None:
    cpu_only = compute_floor(ALLOWANCE_S + 8.0, 1e9)
    assert cpu_only == int(8.0 * 1e9 * FLOOR_FRACTION)
    both = compute_floor(ALLOWANCE_S + 8.0, 1e9, gpu_seconds=GPU_ALLOWANCE_S + 4.0, gpu_rate=1e14)
    assert both == int(8.0 * 1e9 * FLOOR_FRACTION + 4.0 * 1e14 * GPU_FLOOR_FRACTION)
    assert compute_floor(ALLOWANCE_S + 8.0, 1e9, gpu_seconds=None, gpu_rate=1e14) == cpu_only  # unmeasured: no term


def test_on_this_machine_the_nvml_path_is_absent_and_the_fields_say_so() -> None:
    source, why = open_source()
    assert source is None and "no GPU time measured" in why
    with watched(lambda: tree_pids(os.getpid()), gpu=True) as gpu:
        pass
    fields = usage_fields(3.0, 1.0, gpu.usage)
    assert fields["gpu_seconds"] is None and fields["gpu_energy_j"] is None
    assert fields["gpu_note"] == why
    assert fields["flops_floor"] == compute_floor(3.0, fields["flop_rate"])
    with watched(lambda: set(), gpu=False) as none:
        pass
    assert none.usage.gpu_seconds is None and "given none" in none.usage.gpu_note
    assert os.getpid() in tree_pids(os.getppid())
