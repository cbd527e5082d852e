"""Whether learner code still trains on this machine's device under the learner hosts' seccomp filter.

The filter (``workers/sandbox/seccomp.py``) denies file locks, inotify and more; a GPU driver
that needed one of them would break every sandboxed GPU trial. This loads the filter into
its own process first (as bwrap does for a host; no bubblewrap needed, so it runs on a lent
GPU machine too), then initialises the device, runs a few bf16 (CUDA) or float32 (CPU)
training steps of a small network and, on CUDA, a torch.compile'd function (inductor's cache
takes ``filelock`` locks, which fall back to lock files), and checks a denied call is denied.

Usage: ``python bench/seccomp_check.py --device cuda`` (``bench/gpu_checks.sh`` runs it). Prints
one JSON line; exit 1 if anything failed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEYCTL = {"x86_64": 250, "aarch64": 219}  # the call every host must be refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    from workers.sandbox.seccomp import apply_to_this_thread, compile_filter

    started = time.perf_counter()
    apply_to_this_thread(compile_filter())  # before torch starts any thread
    report: dict[str, object] = {"device": args.device, "filtered": True}
    libc = ctypes.CDLL(None, use_errno=True)
    number = KEYCTL.get(os.uname().machine)
    if number is not None:
        report["keyctl_refused"] = libc.syscall(number, 0, ctypes.c_ulong(0xFFFFFFFD), 0) == -1
    try:
        import torch

        device = torch.device(args.device)
        net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device)
        dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
        for _ in range(5):
            with torch.autocast(args.device, dtype=dtype, enabled=args.device == "cuda"):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        report["loss"] = loss.item()
        if args.device == "cuda":
            report["gpu"] = torch.cuda.get_device_name()
            compiled = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2)
            report["compiled_ok"] = bool(torch.allclose(compiled(x), torch.nn.functional.gelu(x) * 2))
        report["ok"] = report.get("keyctl_refused", True) and report.get("compiled_ok", True)
    except Exception as exc:  # noqa: BLE001 - what broke under the filter is the finding
        report.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
