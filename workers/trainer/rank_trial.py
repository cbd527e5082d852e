"""A multi-worker trial as sandboxed ranks: one learner host per rank, on one node.

Where the sandbox is in force, a learner asking for ``num_workers > 1`` never leaves learner
hosts: this process (the trial's, which reserved every rank's CPUs and GPUs in one bundle, so
on one node) starts one host per rank inside the trial's private network namespace
(:mod:`workers.sandbox.rank_net`), whose host joins the ``torch.distributed`` group before
``train`` (:mod:`workers.sandbox.rank_group`: ``env://``, ``MASTER_ADDR`` 127.0.0.1). Harness code speaks the wire with
every rank: rank 0's trial is an ordinary one (:func:`~workers.trainer.trial.run_trial_in_host`:
progress, curve, checkpoints, rungs, its dev scores and predictor); the other ranks get the
same request without rungs and may only ask for data and report FLOPs. Every rank's FLOPs
and CPU (and, where NVML is, GPU) time are summed into the trial's charge and floor; each
rank's log is kept. A rank that fails, dies or breaks the protocol ends the group (its peers
would wait in a collective), and the trial fails naming that rank; once rank 0 is done the
others have :data:`FOLLOWER_GRACE_S` to finish.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from services.core.checkpoint_plan import checkpoint_steps
from services.core.errors import LearnerError
from services.core.rulesets import cap_message
from services.store import key_layout
from workers.learners.protocol import Resources
from workers.sandbox.client import LearnerHost
from workers.sandbox.launch import resolve_sandbox
from workers.sandbox.messages import Limits
from workers.sandbox.metering.gpu_usage import watched
from workers.sandbox.metering.usage import tree_pids
from workers.sandbox.ops import OP, HostOp
from workers.sandbox.rank_net import RankNet
from workers.trainer.energy import RaplWindow
from workers.trainer.frame_caps import trial_frame_caps
from workers.trainer.host_usage import sum_known, usage_fields
from workers.trainer.trial import (
    TRIAL_INDEX,
    TrialSpec,
    failure_metrics,
    run_trial_in_host,
    task_parts,
    trial_prefix,
    trial_request,
)
from workers.trainer.trial_answers import CHECKPOINT_MAX_BYTES, answer_past, request_argument
from workers.trainer.trial_flops import FLOP_KEYS, no_flops, reported_flops

FOLLOWER_GRACE_S = 60.0
"""How long the other ranks may go on once rank 0's trial has ended."""


def sandboxed_ranks(resources: Resources, sandbox: str) -> bool:
    """Whether this learner's trials run as sandboxed ranks (else, trusted code under
    ``NEVIS_SANDBOX=none``, as a Ray Train group: :mod:`workers.trainer.distributed`)."""
    return resources.num_workers > 1 and resolve_sandbox(sandbox) == "bwrap"


def run_ranked_trial(config: dict[str, Any], spec: TrialSpec, resources: Resources) -> dict[str, Any]:
    """Run one trial's ranks in learner hosts and return its metrics (never raises for the
    learner's failures: they fail the trial, charged what every rank reported)."""
    world = resources.num_workers
    started = time.perf_counter()
    hosts: list[LearnerHost] = []
    net = RankNet(sandbox=resolve_sandbox(spec.host.sandbox), world_size=world)
    try:
        net.open()
    except Exception as exc:  # noqa: BLE001 - no namespace for the ranks: the trial fails, saying why
        return failure_metrics(config, exc, no_flops())
    try:
        # From this thread, which outlives them: bwrap's --die-with-parent ends a host with the
        # thread that started it.
        for rank in range(world):
            try:
                hosts.append(LearnerHost(replace(spec.host, rank=net.slot(rank))))
            except Exception as exc:  # noqa: BLE001 - a rank that cannot start fails the trial
                return failure_metrics(config, exc, no_flops())
        before = [h.cpu_seconds() for h in hosts]
        rapl = RaplWindow().start()  # the node's package energy over the ranks' trial, where exposed
        with watched(lambda: set().union(*(tree_pids(h.pid) for h in hosts)), gpu=spec.host.gpu) as gpu:
            results = _run_group(hosts, config, spec)
        used = [
            None if b is None or a is None else max(a - b, 0.0)
            for b, a in zip(before, (h.cpu_seconds() for h in hosts), strict=True)
        ]
    finally:
        for host in hosts:
            host.close()
        net.close()
    usage = usage_fields(sum_known(used), time.perf_counter() - started, gpu.usage, rapl_j=rapl.joules())
    return {**_combine(results), **usage, "num_workers": world}


def _run_group(hosts: list[LearnerHost], config: Mapping[str, Any], spec: TrialSpec) -> list[dict[str, Any]]:
    """Every rank's result, rank 0's first; the first to fail closes the others' hosts."""
    with ThreadPoolExecutor(len(hosts)) as pool:
        futures: list[Future[dict[str, Any]]] = [pool.submit(run_trial_in_host, hosts[0], config, spec)]
        futures += [pool.submit(_follow, hosts[r], config, spec, r) for r in range(1, len(hosts))]
        pending, grace_until = set(futures), None
        while pending:
            timeout = None if grace_until is None else max(grace_until - time.monotonic(), 0.0)
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:  # rank 0 ended and the others did not follow in time
                _close_all(hosts)
                grace_until = time.monotonic() + FOLLOWER_GRACE_S  # closed hosts answer at once
                continue
            if any(f.result().get("status") != "ok" for f in done):
                _close_all(hosts)  # its peers would wait for it in a collective
            if futures[0] in done and grace_until is None:
                grace_until = time.monotonic() + FOLLOWER_GRACE_S
        return [f.result() for f in futures]


def _close_all(hosts: list[LearnerHost]) -> None:
    for host in hosts:
        if host.alive:
            host.close()


def _follow(host: LearnerHost, config: Mapping[str, Any], spec: TrialSpec, rank: int) -> dict[str, Any]:
    """Rank ``rank`` (not 0) trains: it gets the trial's data and may ask for more and report
    FLOPs; a checkpoint or rung report from it breaks the protocol. Returns its status,
    error and FLOPs; its log is kept beside the trial's as ``log-rank-<rank>.txt``."""
    limits = Limits(steps=spec.steps, checkpoint_at=checkpoint_steps(spec.steps, spec.checkpoint_fractions))
    spent: dict[str, Any] = no_flops()

    def on_message(message: dict[str, Any], parts: list) -> tuple[dict[str, Any], list] | None:
        nonlocal spent  # the message was read through its declaration, with these limits, by host.call
        if message[OP] == HostOp.FLOPS:
            spent = reported_flops(message, spent)
            _check_rank_cap(spec, int(config[TRIAL_INDEX]), rank, spent)
            return None
        if message[OP] in (HostOp.CHECKPOINT, HostOp.RUNG):
            raise LearnerError(f"rank {rank} sent a {message[OP]} message: only rank 0 does")
        return answer_past(spec.harness, message[OP], request_argument(message))

    mark = host.log.position
    prepared = [] if spec.prepared is None else [spec.prepared]
    caps = trial_frame_caps(
        num_dev=len(spec.dev.labels),
        num_classes=spec.info.num_classes,
        limits=spec.host.limits,
        proxy=None,
        checkpoint_bytes=CHECKPOINT_MAX_BYTES,
    )
    try:
        result, _ = host.call(
            trial_request(config, spec, limits, capped=False),
            [*task_parts(spec.train, spec.dev), *prepared, spec.state],
            on_message=on_message,
            announce=caps,
            limits=limits,
        )
        outcome = {
            "status": "ok" if result["status"] == "ok" else "failed",
            "error": f"rank {rank}: {result.get('error') or result['status']}",
            **{k: max(int(spent[k]), int(result.get(k, 0))) for k in FLOP_KEYS},
        }
    except _CapReached as exc:  # the task's cap, reached with this rank's work: the trial stops
        outcome = {"status": "stopped", "error": str(exc), **spent}
    except Exception as exc:  # noqa: BLE001 - died, was closed, or broke the protocol
        outcome = {"status": "failed", "error": f"rank {rank}: {type(exc).__name__}: {exc}", **spent}
    _keep_log(host, mark, spec, config, rank)
    return outcome


class _CapReached(Exception):
    """The task's running charge reached its cap on a report of a rank other than 0."""


def _check_rank_cap(spec: TrialSpec, index: int, rank: int, spent: Mapping[str, Any]) -> None:
    """Tell the task's charge what rank ``rank`` spent so far (every rank counts, not rank 0
    alone); raise :class:`_CapReached` once the task's cap is reached. Rank 0 hears of it at its
    own next report (the charge it asks about includes this rank's) or when its host is closed."""
    if spec.rules.task_flop_cap is None:
        return
    import ray  # noqa: PLC0415

    counted = int(spent["flops_measured"]) + int(spent["flops_reported"])
    go_on, total = ray.get(spec.harness.budget_report.remote(index, counted, rank))
    if not go_on:
        raise _CapReached(cap_message(spec.rules.ruleset, spec.rules.task_flop_cap, total, started=True))


def _keep_log(host: LearnerHost, mark: int, spec: TrialSpec, config: Mapping[str, Any], rank: int) -> None:
    key = key_layout.trial_log_key(trial_prefix(spec, int(config[TRIAL_INDEX])), rank=rank)
    try:
        host.settle_log()
        _put(spec, key, host.log_since(mark))
    except Exception:  # noqa: BLE001 - a log that cannot be kept does not fail its trial
        pass


def _put(spec: TrialSpec, key: str, data: bytes) -> None:
    import ray  # noqa: PLC0415

    ray.get(spec.harness.put.remote(key, data))


def _combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank 0's metrics with every rank's FLOPs summed; failed if any rank failed, naming the first."""
    lead, followers = results[0], results[1:]
    summed = {k: sum(int(r.get(k, 0)) for r in results) for k in FLOP_KEYS}
    extra = (
        summed["flops_measured"]
        + summed["flops_reported"]
        - int(lead.get("flops_measured", 0))
        - int(lead.get("flops_reported", 0))
    )
    combined = {
        **lead,
        **summed,
        "flops_source": "reported" if summed["flops_reported"] else "measured",
        "flops_updates": int(lead.get("flops_updates", 0)) + extra,
    }
    capped = [r for r in followers if r["status"] == "stopped"]
    if capped and lead.get("status") != "stopped":  # a rank's work reached the task's cap
        return {**combined, "status": "stopped", "error": capped[0]["error"], "traceback": ""}
    failed = [r for r in followers if r["status"] != "ok"]
    if lead.get("status") == "ok" and failed:
        return {**combined, "status": "failed", "error": failed[0]["error"], "traceback": ""}
    if lead.get("status") == "failed" and failed:  # theirs first: rank 0 may have been closed for it
        return {**combined, "error": f"{'; '.join(r['error'] for r in failed)}; rank 0: {lead.get('error')}"[:4000]}
    return combined


__all__ = ["FOLLOWER_GRACE_S", "run_ranked_trial", "sandboxed_ranks"]
