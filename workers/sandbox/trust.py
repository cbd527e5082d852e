"""The one trust rule: code that came from a submitter runs only in a sandboxed learner host.

Decided on the *resolved* sandbox (what :func:`~workers.sandbox.launch.resolve_sandbox` turns
the setting into on this machine), never on the setting's spelling: ``auto`` on a machine with
bubblewrap is ``bwrap`` and binds exactly as an explicit ``bwrap`` does.

Multi-worker trials are the one place learner code would run outside a learner host (Ray
Train workers with ``torch.distributed``, which a sandbox without network cannot offer), so
they are refused wherever the sandbox is in force, and for every uploaded bundle or image
whatever the sandbox: only a researcher's own code under ``NEVIS_SANDBOX=none`` (or ``auto``
on a machine without bubblewrap) may train with several workers.
"""

from __future__ import annotations

from workers.sandbox.launch import resolve_sandbox


def multi_worker_refusal(num_workers: int, *, sandbox: str, submitted: bool) -> str | None:
    """Why a learner asking for ``num_workers`` per trial may not run here, or ``None``.

    ``sandbox`` is the setting (``auto``, ``bwrap``, ``none``); ``submitted`` says the learner
    came from an upload (a bundle or an image) rather than from the operator's installation.
    """
    if num_workers <= 1:
        return None
    resolved = resolve_sandbox(sandbox)
    if submitted:
        return (f"asks for {num_workers} workers per trial, and multi-worker trials run outside "
                "the learner sandbox, which no uploaded bundle or image may do: declare "
                "Resources(num_workers=1)")
    if resolved == "bwrap":
        return (f"asks for {num_workers} workers per trial: multi-worker trials run outside the "
                f"learner sandbox, which is in force here (NEVIS_SANDBOX={sandbox} resolves to "
                "bwrap). Declare Resources(num_workers=1), or run your own code with "
                "NEVIS_SANDBOX=none on a machine you trust")
    return None


__all__ = ["multi_worker_refusal"]
