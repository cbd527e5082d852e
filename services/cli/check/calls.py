"""``nevis check``'s driver: each protocol call of a learner, made in its sandboxed host on the
built-in two-task stream, and judged.

Harness code talks to the learner host exactly as a run does (the same requests, the same
checked replies, :mod:`workers.sandbox.messages`), but answers the host's requests itself
(checkpoints are counted, not stored) instead of through a Ray actor, so a check needs no Ray,
no database and no object store, and takes seconds. The round trip loads each saved predictor
in a second host, a fresh process, as prediction jobs and the probe pool do. The first broken
call ends the check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from services.cli.check import diagnosis as dx
from services.cli.check.tiny_stream import CheckTask, check_stream
from services.core.checkpoint_plan import checkpoint_steps
from services.core.errors import LearnerError
from services.core.metrics import task_error
from workers.learners.protocol import Choice, LogUniform, SearchDomain
from workers.sandbox import messages
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import LearnerDeclaration, info_to_json
from workers.sandbox.learner_calls import SandboxedLearner, describe
from workers.sandbox.limits import HostLimits
from workers.sandbox.ops import OP, HostOp, PrepareTask, Trial, frame
from workers.sandbox.trust import multi_worker_refusal

CHECKPOINT_FRACTIONS = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class CallOutcome:
    """One row of the check: a call, on which task, how it went (ok, warn, FAIL), and the fix."""

    call: str
    task: int | None
    status: str
    detail: str
    fix: str = ""
    seconds: float = 0.0


class CheckStopped(Exception):
    """The first broken call: the check ends there."""


@dataclass
class CheckRun:
    """One check of ``entrypoint`` importable from ``import_root`` (then ``more_paths``: an
    image's site-packages, after its ``/opt/learner``)."""

    import_root: Path
    entrypoint: str
    sandbox: str = "auto"
    steps: int = 8
    limits: HostLimits = field(default_factory=HostLimits)
    on_outcome: Callable[[CallOutcome], None] | None = None
    more_paths: tuple[str, ...] = ()
    outcomes: list[CallOutcome] = field(default_factory=list)
    output: bytes = b""  # what the learner's hosts printed (its prints, failed calls' tracebacks)
    _clock: float = 0.0
    _hosts: list[LearnerHost] = field(default_factory=list)

    def run(self) -> list[CallOutcome]:
        """Every call's outcome, in order, up to the first broken one."""
        paths = (str(self.import_root), *self.more_paths)
        spec = HostSpec(self.entrypoint, paths, self.sandbox, 1, limits=self.limits)
        with ExitStack() as stack:
            try:
                self._start()
                host = stack.enter_context(self._host(spec))
                declaration = self._declare(host)
                state, kept = declaration.init_state, {}
                loaders: list[SandboxedLearner] = []  # a second host, started once a predictor exists
                for task in check_stream():
                    result, out = self._train(host, declaration, task, state, kept)
                    if not loaders:
                        loaders.append(SandboxedLearner(stack.enter_context(self._host(spec, fresh=True))))
                    state = self._judge(loaders[0], task, result, out, kept)
            except CheckStopped:
                pass
            finally:
                self.output = b"".join(host.log_since(0) for host in self._hosts)
        return self.outcomes

    # --- rows -------------------------------------------------------------------------------------

    def _record(self, call: str, task: int | None, status: str, detail: str, fix: str = "") -> None:
        now = time.perf_counter()
        outcome = CallOutcome(call, task, status, detail, fix, now - self._clock)
        self._clock = now
        self.outcomes.append(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        if status == "FAIL":
            raise CheckStopped(call)

    def _start(self) -> None:
        self._clock = time.perf_counter()

    def _host(self, spec: HostSpec, *, fresh: bool = False) -> LearnerHost:
        try:
            host = LearnerHost(spec)
        except LearnerError as exc:
            self._record(dx.LOAD, None, "FAIL", str(exc), dx.fix_for(dx.LOAD, str(exc)))
            raise  # not reached
        self._hosts.append(host)
        if fresh:
            self._clock = time.perf_counter()  # its start-up is no call's time
        else:
            self._record(
                dx.LOAD,
                None,
                "ok",
                f"{self.entrypoint} made a learner with every protocol method "
                f"(sandbox: {host.sandbox}, device: {host.device})",
            )
        return host

    def _declare(self, host: LearnerHost) -> LearnerDeclaration:
        try:
            declaration = describe(host)
        except LearnerError as exc:
            self._record(dx.DECLARATION, None, "FAIL", str(exc), dx.fix_for(dx.DECLARATION))
        refusal = multi_worker_refusal(declaration.resources.num_workers, sandbox=self.sandbox, submitted=True)
        if refusal:
            self._record(dx.DECLARATION, None, "FAIL", f"the learner {refusal}", dx.fix_for(dx.DECLARATION))
        res = declaration.resources
        self._record(
            dx.DECLARATION,
            None,
            "ok",
            f"name {declaration.name!r}; search space {sorted(declaration.search_space) or 'empty'}; "
            f"{res.num_workers} worker x {res.cpus_per_worker:g} CPU, {res.gpus_per_worker:g} GPU; "
            f"initial state {len(declaration.init_state)} bytes pickled",
        )
        return declaration

    def _judge(
        self, loader: SandboxedLearner, task: CheckTask, result: dict[str, Any], out: list, kept: dict[int, bytes]
    ) -> bytes:
        """The calls after training: predictions, the round trip, features, FLOPs; the new state."""
        order = task.info.order
        scores, predictor, new_state = out
        self._predict_shape(task, scores)
        handle = self._round_trip(loader, task, predictor, scores)
        self._features(loader, task, handle)
        self._flops(task, result)
        kept[order] = predictor
        return new_state

    def _train(
        self, host: LearnerHost, declaration: LearnerDeclaration, task: CheckTask, state: bytes, kept: dict[int, bytes]
    ) -> tuple[dict[str, Any], list]:
        order, info = task.info.order, task.info
        at = checkpoint_steps(self.steps, CHECKPOINT_FRACTIONS)
        limits = messages.Limits(steps=self.steps, checkpoint_at=at)
        heard = Heard(order, kept)
        past = [t.info for t in check_stream_before(order)]
        base = {
            "data_key": f"check/{order}",
            "info": info_to_json(info),
            "past": [info_to_json(p) for p in past],
            "stream_length": 2,
        }
        prepared: list[bytes] = []
        try:
            parts = [*task.dev.to_arrays()[:2], *task.train.to_arrays()]  # trial.task_parts' layout (no Ray import)
            if declaration.prepares_task:
                _, out = host.call(
                    PrepareTask(**base, seed=order), [*parts, state], on_message=heard.answer, limits=limits
                )
                prepared, parts = [out[0]], []  # the task's data is in the host now
            request = Trial(
                **base,
                steps=self.steps,
                checkpoint_at=list(at),
                seed=0,
                config=sample_config(declaration.search_space),
                prepared=bool(prepared),
            )
            result, out = host.call(request, [*parts, *prepared, state], on_message=heard.answer, limits=limits)
        except Exception as exc:  # noqa: BLE001 - a host that raised, died or broke the protocol
            self._record(dx.TRAIN, order, "FAIL", f"{type(exc).__name__}: {exc}"[:600], dx.fix_for(dx.TRAIN))
        if result["status"] != "ok":
            error, trace = str(result.get("error", "")), str(result.get("traceback", ""))
            call = dx.blamed_call(error, trace)
            place = dx.where(trace)
            self._record(call, order, "FAIL", error[:600] + (f" (at {place})" if place else ""), dx.fix_for(call))
        losses = [(int(s), float(loss)) for s, loss in result["curve"] if loss is not None]
        bad = next(((s, v) for s, v in losses if not math.isfinite(v)), None)
        if bad is not None:
            self._record(
                dx.TRAIN, order, "FAIL", f"the loss is not finite ({bad[1]}: NaN or inf) at step {bad[0]}", dx.LOSS_FIX
            )
        missed = [s for s in at if s not in heard.checkpoints]
        curve = f"loss {losses[0][1]:.3g} → {losses[-1][1]:.3g}" if losses else "no loss reported to ctx.progress"
        text = (
            f"{info.kind}-label, {self.steps} steps, {curve}; checkpoints at {sorted(heard.checkpoints)} "
            f"({', '.join(f'{n} B' for n in heard.checkpoints.values())})"
        )
        status = "warn" if missed or not losses else "ok"
        fix = (
            f"Call ctx.progress(step, predictor, loss=...) at every step 0..ctx.steps: checkpoints "
            f"{missed} were asked for and never made."
            if missed
            else ""
        )
        self._record(dx.TRAIN, order, status, text, fix)
        return result, out

    def _predict_shape(self, task: CheckTask, scores: np.ndarray) -> None:
        want = (task.info.num_dev, task.info.num_classes)
        if scores.shape != want or not np.isfinite(scores).all():
            what = f"shape {scores.shape}" if scores.shape != want else "non-finite scores"
            self._record(dx.PREDICT, task.info.order, "FAIL", f"{what}; expected finite {want}", dx.fix_for(dx.PREDICT))
        error = task_error(scores, task.dev.labels, task.info.kind)
        self._record(dx.PREDICT, task.info.order, "ok", f"{scores.shape} {scores.dtype}; dev error {error:.3f}")

    def _round_trip(self, loader: SandboxedLearner, task: CheckTask, predictor: bytes, scores: np.ndarray) -> Any:
        order = task.info.order
        try:
            handle = loader.load_predictor(predictor, task.info)
            again = loader.predict(handle, task.dev.images)
        except LearnerError as exc:
            self._record(dx.ROUND_TRIP, order, "FAIL", str(exc)[:600], dx.fix_for(dx.ROUND_TRIP))
        if again.shape != scores.shape or not np.allclose(again, scores, rtol=1e-3, atol=1e-4):
            gap = float(np.max(np.abs(again - scores))) if again.shape == scores.shape else float("nan")
            self._record(
                dx.ROUND_TRIP,
                order,
                "FAIL",
                f"a loaded predictor predicts differently (shape {again.shape}, largest gap {gap:.3g})",
                dx.fix_for(dx.ROUND_TRIP),
            )
        self._record(
            dx.ROUND_TRIP, order, "ok", f"{len(predictor)} bytes; reloaded in a fresh process, same predictions"
        )
        return handle

    def _features(self, loader: SandboxedLearner, task: CheckTask, handle: Any) -> None:
        try:
            feats = loader.features(handle, task.dev.images)
        except LearnerError as exc:
            self._record(dx.FEATURES, task.info.order, "FAIL", str(exc)[:600], dx.fix_for(dx.FEATURES))
        if feats.ndim != 2 or len(feats) != task.info.num_dev or feats.shape[1] < 1 or not np.isfinite(feats).all():
            self._record(
                dx.FEATURES,
                task.info.order,
                "FAIL",
                f"shape {feats.shape}; expected finite ({task.info.num_dev}, d)",
                dx.fix_for(dx.FEATURES),
            )
        self._record(dx.FEATURES, task.info.order, "ok", f"{feats.shape} {feats.dtype}")

    def _flops(self, task: CheckTask, result: dict[str, Any]) -> None:
        measured, reported = int(result["flops_measured"]), int(result["flops_reported"])
        untracked = int(result.get("flops_untracked", 0))
        if measured + reported == 0:
            self._record(dx.FLOPS, task.info.order, "FAIL", "no FLOPs counted in the trial", dx.fix_for(dx.FLOPS))
        share = untracked / measured if measured else 0.0
        text = f"measured {measured:.3e}, reported {reported:.3e}" + (f", {share:.0%} untracked" if untracked else "")
        fix = (
            "Pass the modules you run to ctx.track(module): untracked ones are counted, but flagged."
            if untracked
            else ""
        )
        self._record(dx.FLOPS, task.info.order, "warn" if untracked else "ok", text, fix)


@dataclass
class Heard:
    """What the host told or asked harness code during one trial, answered from the check stream."""

    order: int  # the task being trained
    kept: dict[int, bytes]  # predictors of earlier tasks, by order
    checkpoints: dict[int, int] = field(default_factory=dict)  # step → bytes

    def answer(self, message: dict[str, Any], parts: list) -> tuple[dict[str, Any], list] | None:
        op = message[OP]
        if op == HostOp.CHECKPOINT:
            self.checkpoints[int(message["step"])] = len(parts[0])
            return None
        if op in (HostOp.FLOPS, HostOp.RUNG):
            return None if op == HostOp.FLOPS else (frame(op, **{"continue": True}), [])
        order = message.get("order")
        earlier = {t.info.order: t for t in check_stream_before(self.order)}
        if op == HostOp.PAST_TRAIN and order in earlier:
            return frame(op, ok=True), earlier[order].train.to_arrays()
        if op == HostOp.PAST_PREDICTOR and order in self.kept:
            return frame(op, ok=True), [self.kept[order]]
        return frame(op, ok=False, message=f"nevis check has no {op} for task {order}"), []


def check_stream_before(order: int) -> tuple[CheckTask, ...]:
    return tuple(t for t in check_stream() if t.info.order < order)


def sample_config(space: dict[str, SearchDomain]) -> dict[str, Any]:
    """One configuration from the middle of the search space (geometric middle of a log range)."""
    config: dict[str, Any] = {}
    for name, domain in space.items():
        if isinstance(domain, Choice):
            config[name] = domain.values[0]
        elif isinstance(domain, LogUniform):
            config[name] = math.sqrt(domain.low * domain.high)
        else:
            config[name] = (domain.low + domain.high) / 2
    return config


__all__ = [
    "CHECKPOINT_FRACTIONS",
    "CallOutcome",
    "CheckRun",
    "CheckStopped",
    "Heard",
    "check_stream_before",
    "sample_config",
]
