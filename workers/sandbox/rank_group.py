"""Inside a rank's learner host: join the trial's ``torch.distributed`` group before ``train``.

A multi-worker learner is written against an initialised process group (Ray Train sets one up
for trusted groups; the built-in learners wrap their model in DistributedDataParallel only
when there is one, :func:`workers.learners.training.data_parallel`), so a sandboxed rank's
host sets it up the same way: ``env://`` from the variables its launch gave it
(:mod:`workers.sandbox.rank_net`: ``MASTER_ADDR`` 127.0.0.1 on the trial's private loopback),
gloo on CPUs and NCCL on GPUs, once per host.
"""

from __future__ import annotations

from datetime import timedelta

JOIN_TIMEOUT_S = 300.0  # every rank starts before any trains: a peer that never comes fails the trial


def join_group(world_size: int, device: str) -> None:
    """Initialise the default process group for this rank, unless one is up already."""
    if world_size <= 1:
        return
    import torch.distributed as dist  # noqa: PLC0415 - only multi-worker hosts need it

    if dist.is_initialized():
        return
    dist.init_process_group(
        backend="nccl" if device.startswith("cuda") else "gloo",
        init_method="env://",
        timeout=timedelta(seconds=JOIN_TIMEOUT_S),
    )


__all__ = ["JOIN_TIMEOUT_S", "join_group"]
