"""A learner host's start-up: take the protocol's pipes, load the learner the first frame names,
pick its device, answer ``ready`` (or the error that stopped it), then serve.

Run by :mod:`workers.sandbox.host_boot` once the learner's folders are on the path; kept apart
from :mod:`workers.sandbox.host`, which serves requests once the learner is loaded.
"""

from __future__ import annotations

import os
import sys
import traceback

from services.core.errors import UnknownNameError
from workers.sandbox import wire
from workers.sandbox.host import Host, harness_frame
from workers.sandbox.ops import Reply, frame


def warm_up() -> None:
    """Import now what a learner's first call would: an optimiser's first construction, and
    the FLOP meter's first measured convolution (a prediction's too), import ``torch._dynamo``
    (1.4–1.8 s on a loaded 2-core machine; 0.75 s of a first evaluation here). An executor's
    hosts start ahead of their first trial or evaluation, so done here, before ``ready``, it
    costs no call any time."""
    import torch  # noqa: PLC0415
    import torch._dynamo  # noqa: PLC0415

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)  # its first-call wrappers too


def main() -> None:
    """Take the protocol's pipes, load the learner named by the first frame, serve."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)  # the learner's prints go to stderr, never into a frame
    sys.stdout = sys.stderr
    hello, _ = harness_frame(proto_in)
    try:
        import torch  # noqa: PLC0415

        from workers.learners.loading import load_learner  # noqa: PLC0415

        torch.set_num_threads(int(hello.get("threads", 1)))
        learner = load_learner(str(hello["spec"]))
        if hello.get("warm"):
            warm_up()
        wants_gpu = learner.resources().gpus_per_worker > 0
        device = "cuda:0" if wants_gpu and torch.cuda.is_available() else "cpu"
    except Exception as exc:  # noqa: BLE001 - reported to the harness, which raises it
        kind = "UnknownNameError" if isinstance(exc, UnknownNameError) else type(exc).__name__
        wire.send(
            proto_out,
            frame(Reply.ERROR, error=kind, message=str(exc)[:4000], traceback=traceback.format_exc()[-20000:]),
        )
        return
    wire.send(proto_out, frame(Reply.READY, device=device))
    Host(learner, proto_in, proto_out, device=device).serve()


__all__ = ["main", "warm_up"]


if __name__ == "__main__":
    main()
