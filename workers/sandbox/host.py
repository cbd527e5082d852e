"""The learner host: the process that imports and calls learner code, run inside the sandbox.

Started (:mod:`workers.sandbox.host_boot`, then :mod:`workers.sandbox.host_start`) by
:class:`~workers.sandbox.client.LearnerHost`.
It reads frames (:mod:`workers.sandbox.wire`) from the pipe it was given, loads the learner
named in the first one, and answers one request at a time: ``describe``, ``prepare_task``
(a learner's work shared by a task's trials, once per task), ``trial``, ``predict``,
``load_predictor``, ``features``, ``features_and_predict``, ``augment_views``, ``fresh_predictor``,
``release``, ``bye``.
During a trial it asks harness code for earlier tasks' train splits (``past_train``) and the
predictors its run kept for them (``past_predictor``) or the run's ``pretrained`` checkpoint, the
shards of a train split too large to be sent whole (``train_shard``,
:mod:`workers.sandbox.host_stream`), and hands it checkpoints (``checkpoint``); it never touches storage itself. The protocol's file
descriptors are private copies: the learner's prints go to stderr and cannot corrupt frames
(a hostile learner can still write frames of its own, which is why the harness side trusts
nothing in them but numbers and bytes). During a trial, ``prepare_task``, a ``predict`` job and
each of the probe pool's calls (``load_predictor``, ``features``, ``predict_loaded``, ``augment_views``) the
context's FLOP meter watches (:meth:`~workers.sandbox.metering.flops.FlopMeter.watch`): torch modules the
learner did not pass to ``ctx.track`` are counted too, and their share is sent back as
``flops_untracked``. Every reply to those requests carries the FLOPs the call cost
(``flops_measured``, ``flops_reported``, ``flops_untracked``); for the probe pool's calls they
are the analysis's compute, which the probe pool records apart from the learner's cFLOP.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import traceback
from typing import Any, BinaryIO

from services.core.errors import CausalityError, LearnerError
from workers.learners.protocol import MAX_PREPARED_BYTES, LabelledData, Learner
from workers.sandbox import wire
from workers.sandbox.context import FLOP_REPORT_INTERVAL_S, LocalTrialContext, TrialStopped
from workers.sandbox.declaration import LearnerDeclaration, info_from_json
from workers.sandbox.dev_scoring import DevScoring
from workers.sandbox.host_probe import ProbeCalls
from workers.sandbox.host_stream import WireShards
from workers.sandbox.host_values import blob, flops, numeric, peak_memory
from workers.sandbox.ops import SERVED, HostOp, Op, Reply, frame, op_of
from workers.sandbox.proxy_views import proxy_features, proxy_images
from workers.sandbox.rank_group import join_group
from workers.stream.task_view import CausalTaskView


class Host(ProbeCalls):
    """One learner, served over one pair of pipes (the probe pool's calls: :class:`ProbeCalls`)."""

    def __init__(self, learner: Learner, proto_in: BinaryIO, proto_out: BinaryIO, *, device: str) -> None:
        super().__init__()
        self.learner, self.proto_in, self.proto_out, self.device = learner, proto_in, proto_out, device
        self._data: tuple[str, LabelledData | WireShards, LabelledData] | None = None
        self._wire = threading.RLock()  # a streamed split's reader threads ask for shards too
        # A rank of a multi-worker trial: its place in the group (workers/sandbox/rank_net.py).
        self.rank, self.world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))

    # --- the loop ---------------------------------------------------------------------------

    def serve(self) -> None:
        while True:
            header, parts = harness_frame(self.proto_in)
            op = op_of(header)
            if op == Op.BYE:
                return
            served = isinstance(op, str) and op in SERVED  # a declared request (tests/unit/sandbox/test_ops.py)
            handler = getattr(self, f"_op_{op}", None) if served else None
            try:
                if handler is None:
                    raise LearnerError(f"unknown request {op!r}")
                reply, out = handler(header, parts)
            except Exception as exc:  # noqa: BLE001 - the learner's failure goes back as data
                self._tell(
                    frame(
                        Reply.ERROR,
                        error=type(exc).__name__,
                        message=str(exc)[:4000],
                        traceback=traceback.format_exc()[-20000:],
                    )
                )
                continue
            self._tell(frame(Reply.RESULT, **reply), out)

    # --- requests ---------------------------------------------------------------------------

    def _op_describe(self, header: dict, parts: list) -> tuple[dict, list]:
        learner = self.learner
        declaration = LearnerDeclaration(
            name=str(getattr(learner, "name", type(learner).__name__)),
            search_space=dict(learner.search_space()),
            resources=learner.resources(),
            init_state=pickle.dumps(learner.init_state()),
            preferred_search=getattr(learner, "preferred_search", None),
            prepares_task=callable(getattr(learner, "prepare_task", None)),
        )
        return declaration.to_header(), [declaration.init_state]

    def _op_trial(self, header: dict, parts: list) -> tuple[dict, list]:
        """Train one trial; its failure is a ``failed`` result with the FLOPs spent so far. Its dev
        scores are those the learner's ``ctx.dev_error`` got for the same predictor bytes, if any
        (:mod:`workers.sandbox.dev_scoring`): one dev pass per set of weights, not two."""
        prepared = pickle.loads(parts[-2]) if header.get("prepared") else None  # prepare_task's result
        state = parts[-1]
        view, dev = self._view(header, parts[:-2] if header.get("prepared") else parts[:-1], prepared)
        ctx = LocalTrialContext(
            seed=int(header["seed"]),
            steps=int(header["steps"]),
            save_predictor=self.learner.save_predictor,
            on_checkpoint=self._checkpoint,
            checkpoint_at=tuple(header["checkpoint_at"]),
            device=self.device,
            rung_at=tuple(header.get("rungs") or ()),
            rank=self.rank,
            world_size=self.world_size,
            flop_report_interval_s=0.0 if header.get("flops_every_step") else FLOP_REPORT_INTERVAL_S,
        )
        ctx.dev_scoring = scoring = DevScoring(  # the harness's dev pass, offered to the learner
            dev,
            view.info.kind,
            lambda p: numeric(self.learner.predict(p, dev.images, ctx), "predict()"),
            lambda p: blob(self.learner.save_predictor(p), "save_predictor()"),
        )
        proxy = header.get("rung_proxy")  # the proxy scheduler's rungs: LiDAR views, no labels
        ctx.on_rung = lambda step, predictor: self._rung(step, predictor, dev, ctx, proxy and (view, proxy))
        ctx.on_flops = lambda measured, reported: self._flops_so_far(measured, reported, ctx.meter.untracked)
        started = time.perf_counter()
        ctx.meter.watch()  # modules the learner does not pass to ctx.track are counted too
        try:
            join_group(self.world_size, self.device)  # a rank of a multi-worker trial: its peers, on its loopback
            output = self.learner.train(view, pickle.loads(state), dict(header["config"]), ctx)
            updates = ctx.meter.updates  # training's updates, before the harness's dev pass
            predictor = blob(self.learner.save_predictor(output.predictor), "save_predictor()")
            scores = scoring.scores_for(output.predictor, predictor)  # scored already for these bytes, or now
            new_state = pickle.dumps(output.state)
            curve = ctx.wire_curve()  # its losses read now: one the learner passed that cannot be is its error
        except TrialStopped as stop:  # the search ended it at a rung: it keeps what it spent
            return {
                "status": "stopped",
                "stopped_at": stop.step,
                **flops(ctx, updates=ctx.meter.updates),
                "curve": ctx.wire_curve(or_empty=True),
                "wall_time_s": time.perf_counter() - started,
            }, []
        except Exception as exc:  # noqa: BLE001 - a learner's failure is data, not a crash
            return {
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}"[:4000],
                "traceback": traceback.format_exc()[-20000:],
                **flops(ctx, updates=ctx.meter.updates),
                "curve": ctx.wire_curve(or_empty=True),
            }, []
        finally:
            ctx.meter.untrack_all()  # ends the watch; modules kept in learner state must not count on later
        result = {
            "status": "ok",
            "wall_time_s": time.perf_counter() - started,
            "peak_memory_bytes": peak_memory(self.device),
            "curve": curve,
            "missed_checkpoints": list(ctx.missed_checkpoints),
            **flops(ctx, updates=updates),
        }
        return result, [scores, predictor, new_state]

    def _op_prepare_task(self, header: dict, parts: list) -> tuple[dict, list]:
        """The learner's ``prepare_task`` on the view a trial of this task gets, metered as a
        whole: its FLOPs are the task's, charged once; its result goes to every trial. Its FLOPs
        so far are reported as a trial's are (at ``ctx.progress``, and once more if it raises),
        so a preparation that fails or is killed is charged what it spent."""
        view, _ = self._view(header, parts[:-1], None)
        started = time.perf_counter()
        with self._metered(header) as ctx:
            ctx.on_flops = lambda measured, reported: self._flops_so_far(measured, reported, ctx.meter.untracked)
            try:
                prepared = pickle.dumps(self.learner.prepare_task(view, pickle.loads(parts[-1]), ctx))
            except Exception:
                self._flops_so_far(int(ctx.meter.measured), int(ctx.meter.reported), ctx.meter.untracked)
                raise
        if len(prepared) > MAX_PREPARED_BYTES:
            raise LearnerError(
                f"prepare_task() returned {len(prepared)} bytes pickled, over the {MAX_PREPARED_BYTES}-byte limit."
            )
        return {"wall_time_s": time.perf_counter() - started, **flops(ctx)}, [prepared]

    def _op_predict(self, header: dict, parts: list) -> tuple[dict, list]:
        info = info_from_json(header["info"])
        with self._metered(header) as ctx:
            model = self.learner.load_predictor(blob(parts[0], "predictor"), info, ctx)
            scores = numeric(self.learner.predict(model, parts[1], ctx), "predict()")
        return flops(ctx), [scores]

    # --- helpers ----------------------------------------------------------------------------

    def _view(self, header: dict, parts: list, prepared: Any) -> tuple[CausalTaskView, LabelledData]:
        """The causal view of a ``trial`` or ``prepare_task`` request, and the task's dev split."""
        train, dev = self._task_data(header, parts)
        past = {p["order"]: info_from_json(p) for p in header["past"]}
        streamed = train if isinstance(train, WireShards) else None
        view = CausalTaskView(
            info=info_from_json(header["info"]),
            train=streamed.whole if streamed else train,
            dev=dev,
            past=past,
            train_stream=streamed.stream if streamed else None,
            load_past_train=self._past_train,
            stream_length=int(header["stream_length"]),
            load_past_predictor=self._past_predictor,
            load_pretrained=self._pretrained,
            prepared=prepared,
        )
        return view, dev

    def _task_data(self, header: dict, parts: list) -> tuple[LabelledData | WireShards, LabelledData]:
        """This task's splits: sent with the first trial of a task, reused by the next ones; a
        large train split is not sent but named by its shards' rows, and asked for by shard."""
        key, rows = header["data_key"], header.get("train_shards") or []
        if parts:
            dev = LabelledData(parts[0], parts[1])  # trial.py: dev, then train with its originals
            train = WireShards(rows, self._ask) if rows else LabelledData.from_arrays(parts[2:])
            self._data = (key, train, dev)
        if self._data is None or self._data[0] != key:
            raise LearnerError(f"the harness sent no data for {key!r}")
        return self._data[1], self._data[2]

    def _ask(self, header: dict, parts: list | None = None) -> tuple[dict, list]:
        """A request to harness code and its answer, one exchange at a time."""
        with self._wire:
            wire.send(self.proto_out, header, parts or [])
            return harness_frame(self.proto_in)

    def _tell(self, header: dict, parts: list | None = None) -> None:
        with self._wire:
            wire.send(self.proto_out, header, parts or [])

    def _past_train(self, order: int) -> LabelledData:
        header, parts = self._ask(frame(HostOp.PAST_TRAIN, order=order))
        if not header.get("ok"):
            raise CausalityError(str(header.get("message", "not available")))
        return LabelledData.from_arrays(parts)

    def _past_predictor(self, order: int | None, op: HostOp = HostOp.PAST_PREDICTOR) -> bytes:
        header, parts = self._ask(frame(op, order=order))
        if not header.get("ok"):
            raise CausalityError(str(header.get("message", "not available")))
        return blob(parts[0], "past predictor")

    def _pretrained(self) -> bytes:
        return self._past_predictor(None, op=HostOp.PRETRAINED)

    def _rung(
        self,
        step: int,
        predictor: Any,
        dev: LabelledData,
        ctx: LocalTrialContext,
        proxy: tuple[CausalTaskView, dict] | None = None,
    ) -> bool:
        """Dev scores at a rung go to harness code, which scores them and says whether to go on;
        under the ``proxy`` scheduler, features of augmented views of unlabelled train images
        instead (harness code takes their LiDAR). Either pass runs under the trial's meter."""
        if proxy is None:
            scores = numeric(self.learner.predict(predictor, dev.images, ctx), "predict()")
        else:
            view, how = proxy
            images = proxy_images(view, n=int(how["n"]), seed=int(how["seed"]))
            scores = numeric(
                proxy_features(
                    self.learner, predictor, images, n=int(how["n"]), q=int(how["q"]), seed=int(how["seed"]), ctx=ctx
                ),
                "features()",
            )
        header, _ = self._ask(frame(HostOp.RUNG, step=int(step)), [scores])
        return bool(header.get("continue", True))

    def _flops_so_far(self, measured: int, reported: int, untracked: int) -> None:
        self._tell(
            frame(HostOp.FLOPS, flops_measured=measured, flops_reported=reported, flops_untracked=int(untracked))
        )

    def _checkpoint(self, step: int, data: bytes) -> None:
        self._tell(frame(HostOp.CHECKPOINT, step=int(step)), [blob(data, "save_predictor()")])


def harness_frame(stream: BinaryIO) -> tuple[dict, list]:
    """A frame from harness code, which is trusted to send a task's splits, however large."""
    return wire.receive(stream, max_part_bytes=wire.HARNESS_PART_BYTES, max_frame_bytes=None)


__all__ = ["Host", "harness_frame"]
