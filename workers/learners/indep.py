"""The ``indep`` baseline: a fresh network per task, trained on that task alone.

It carries nothing from task to task (its state is always ``None``), draws its trials from
the paper's search space (learning rate, label smoothing) and trains with the paper's recipe
(:mod:`workers.learners.recipe`) and augmentation (:mod:`workers.learners.augment`).

Every forward and backward pass goes through a module handed to ``ctx.track`` just before
use: the network at the start of training, and again by ``predict`` and ``features`` with
the context they are given (so a prediction job is charged to its own context; the
harness's meter moves a module to the newest context that tracks it). The representation
pass goes through a :class:`~workers.learners.models.FeatureView`, tracked on its own.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from services.core.errors import LearnerError
from workers.learners import recipe
from workers.learners.acceleration import Acceleration, autocast, gpu_share, prepare, uncompile
from workers.learners.augment import AugmentConfig, eval_transform
from workers.learners.best_on_dev import BestOnDev
from workers.learners.inference import InferenceTwin, Twin
from workers.learners.input_pipeline import TrainBatches
from workers.learners.models import Classifier, FeatureView, ModelConfig, build_model
from workers.learners.protocol import (
    PAPER_SEARCH_SPACE,
    Resources,
    SearchDomain,
    TaskInfo,
    TaskView,
    TrainOutput,
    TrialContext,
)
from workers.learners.stream_batches import StreamBatches, streamed, train_source
from workers.learners.training import data_parallel, eval_mode, label_tensor
from workers.learners.trial_options import TrialOptions

_FORMAT = 1
DEFAULT_LEARNING_RATE = 0.01


class AuxiliaryObjective(Protocol):
    """A loss over other data, optimised jointly with the task's (MT's auxiliary tasks)."""

    def parameters(self) -> Iterable[nn.Parameter]:
        """Parameters of its own (auxiliary heads) the optimiser must update too."""
        ...

    def loss(self) -> torch.Tensor:
        """The weighted loss of one auxiliary mini-batch, on the shared network."""
        ...


@dataclass(frozen=True)
class IndepPredictor:
    """A network plus what it takes to run and rebuild it.

    ``model`` gives logits and holds the weights; ``feature_view`` runs its penultimate
    layer through a module call, so FLOP tracking sees representation passes too.
    """

    model: Classifier
    feature_view: FeatureView
    model_config: ModelConfig
    augment: AugmentConfig
    kind: str
    twin: InferenceTwin | None = field(default=None, compare=False, repr=False)  # loaded ones only


class IndepLearner:
    """Random initialisation per task, current task only.

    Args:
        model: "resnet34" (default: the paper's low-resolution ResNet-34, on a GPU when the
            cluster has one) or "small_cnn" (a ~240k-parameter CNN, fast on CPUs: the
            ``indep_small`` learner, for smoke runs and tests).
        max_batch: the cap B of the batch-size rule.
        warmup_epochs: epochs of linear learning-rate warm-up (the reference's 7), strictly
            fewer steps than the budget (:func:`~workers.learners.recipe.warmup_steps`).
        warmup_fraction: the most of the step budget the warm-up may take (1: the reference's
            rule alone; 0.5 binds only at small budgets, docs/fidelity.md B6).
        width: first-stage channels of the network; ``None`` for the model's default.
        eval_batch: images per forward pass in ``predict`` and ``features``.
        validate_every: steps between dev validations; the weights with the lowest dev error
            among those validations and the final step are returned (the reference's
            ``fit_with_early_stopping``, every 1000 steps). Budgets of at most this many steps
            validate nothing and return the final weights.
        workers: workers per trial; above 1, each trial is a Ray Train group and the network
            trains with DistributedDataParallel (gloo on CPUs, NCCL on GPUs), every rank
            taking its share of each mini-batch.
        acceleration: channels-last, bf16 autocast, ``torch.compile`` (default: the first two on CUDA).
        trials_per_gpu: trials that share one GPU (``gpus_per_worker = 1 / trials_per_gpu``):
            at the paper's small batches one trial leaves a GPU waiting on its kernel launches,
            and several side by side fill it (``bench/bench_gpu.py --procs``). Each trial's
            FLOPs are counted as before; only the wall time changes.
    """

    name = "indep"

    def __init__(
        self,
        model: str = "resnet34",
        *,
        max_batch: int = 512,
        warmup_epochs: float = recipe.WARMUP_EPOCHS,
        warmup_fraction: float = 0.5,
        width: int | None = None,
        eval_batch: int = 256,
        workers: int = 1,
        validate_every: int = 1000,
        acceleration: Acceleration | None = None,
        trials_per_gpu: int = 1,
    ) -> None:
        ModelConfig(model, 1, width)  # fails early on an unknown model or bad width
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(
                f"The 'max_batch' parameter of IndepLearner must be an int in [1, inf). Got {max_batch!r} instead."
            )
        if not 0.0 <= warmup_fraction <= 1.0 or not warmup_epochs >= 0:
            raise ValueError(
                "The 'warmup_fraction' and 'warmup_epochs' parameters of IndepLearner must be "
                f"in [0, 1] and [0, inf). Got {warmup_fraction!r} and {warmup_epochs!r}."
            )
        if not isinstance(eval_batch, int) or eval_batch < 1:
            raise ValueError(
                f"The 'eval_batch' parameter of IndepLearner must be an int in [1, inf). Got {eval_batch!r} instead."
            )
        self.model_name = model
        self.max_batch = max_batch
        self.warmup_epochs, self.warmup_fraction = warmup_epochs, warmup_fraction
        self.width = width
        self.eval_batch = eval_batch
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"The 'workers' parameter of IndepLearner must be an int in [1, inf). Got {workers!r}.")
        self.workers = workers
        if not isinstance(validate_every, int) or validate_every < 1:
            raise ValueError(
                f"The 'validate_every' parameter of IndepLearner must be an int in [1, inf). Got {validate_every!r}."
            )
        self.validate_every = validate_every
        self.acceleration = acceleration or Acceleration()
        self.gpu_share = gpu_share(trials_per_gpu, workers)

    # --- protocol: declarations ----------------------------------------------------------

    def search_space(self) -> Mapping[str, SearchDomain]:
        return PAPER_SEARCH_SPACE

    def resources(self) -> Resources:
        # The small CNN is a CPU learner; the paper's networks take a GPU wherever there is one.
        gpus = 0.0 if self.model_name == "small_cnn" else self.gpu_share
        return Resources(num_workers=self.workers, cpus_per_worker=1.0, gpus_per_worker=gpus, gpu_optional=True)

    def init_state(self) -> None:
        return None

    # --- protocol: training --------------------------------------------------------------

    def train(self, view: TaskView, state: Any, config: Mapping[str, Any], ctx: TrialContext) -> TrainOutput:
        """Train a fresh network for ``ctx.steps`` steps on the current task's train split.

        ``config`` holds ``learning_rate`` (peak, default 0.01) and ``label_smoothing``
        (default 0). ``ctx.progress`` is called at step 0 (untrained) and after every step.
        """
        info = view.info
        data = train_source(view, ctx.seed)  # a large task: a stream of its shards (NEVIS_STREAM_TRAIN_BYTES)
        n = len(data)
        if n == 0:
            raise LearnerError(f"Task {info.key!r} has an empty training split; nothing to fit.")
        lr = float(config.get("learning_rate", DEFAULT_LEARNING_RATE))
        smoothing = float(config.get("label_smoothing", 0.0))
        steps = int(ctx.steps)

        torch.manual_seed(ctx.seed)
        generator = torch.Generator().manual_seed(ctx.seed)
        options = TrialOptions.from_config(config, self.model_name)
        predictor = self._initial_predictor(view, options, ctx)
        model = prepare(predictor.model, accel := self.acceleration.resolve(ctx.device))
        net = ctx.track(data_parallel(model, ctx))  # before any pass, so every one is counted
        auxiliary = self._auxiliary_objective(view, predictor, config, ctx, generator)
        params = [*model.parameters(), *(auxiliary.parameters() if auxiliary else ())]
        optimizer = recipe.make_optimizer(params, lr)
        batch = options.batch_size or recipe.batch_size(n, max_batch=self.max_batch)
        warmup = recipe.warmup_steps(
            steps, recipe.steps_per_epoch(n, batch), epochs=self.warmup_epochs, max_fraction=self.warmup_fraction
        )
        scheduler = recipe.make_scheduler(optimizer, steps, warmup, kind=options.schedule)
        loss_fn = recipe.make_loss(info.kind, smoothing)
        labels = None if streamed(data) else label_tensor(data.labels, info)

        # Ranks share the batch order (same generator) and crop their own shares independently.
        crops = generator if ctx.world_size == 1 else torch.Generator().manual_seed(ctx.seed + 7919 * (ctx.rank + 1))
        best = BestOnDev(self, predictor, view.dev(), info, ctx)
        ctx.progress(0, predictor, loss=None)
        model.train()
        batches = (StreamBatches if labels is None else TrainBatches)(
            data,
            labels,
            predictor.augment,
            steps=steps,
            batch=batch,
            generator=generator,
            crops=crops,
            device=ctx.device,
            rank=ctx.rank,
            world_size=ctx.world_size,
            prefetch=auxiliary is None,
        )  # an auxiliary objective draws between steps
        for step, (x, y) in enumerate(batches, start=1):  # this rank's share, crops of the originals
            with autocast(ctx.device, accel):
                loss = loss_fn(net(x), y)
                if auxiliary is not None:  # one step over the current and auxiliary batches
                    loss = loss + auxiliary.loss()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            ctx.progress(step, predictor, loss=loss.detach())  # read in batches: no wait a step
            if step < steps and step % self.validate_every == 0:
                best.consider(step)
        best.restore_if_better(steps)
        uncompile(model)
        model.eval()
        return TrainOutput(predictor=predictor, state=None)

    # --- protocol: inference -------------------------------------------------------------

    def predict(self, predictor: IndepPredictor, images: np.ndarray, ctx: TrialContext) -> np.ndarray:
        """Logits (N, num_classes) on centre-cropped images."""
        width = predictor.model_config.num_classes
        return self._run(predictor, predictor.model, images, ctx, width)

    def features(self, predictor: IndepPredictor, images: np.ndarray, ctx: TrialContext) -> np.ndarray:
        """Penultimate features (N, d), after global average pooling."""
        width = predictor.model.feature_dim
        return self._run(predictor, predictor.feature_view, images, ctx, width)

    def features_and_predict(
        self, predictor: IndepPredictor, images: np.ndarray, ctx: TrialContext
    ) -> tuple[np.ndarray, np.ndarray]:
        """Features and logits of the same images from ONE backbone pass: the head applied to
        the features (what ``forward`` does), for the probe pool's pretext error
        (:mod:`workers.sandbox.joint_pass`)."""
        features = self.features(predictor, images, ctx)
        twin = _twin(predictor)
        head = ctx.track((twin.model if twin is not None else predictor.model).head)
        device = next(predictor.model.parameters()).device
        with torch.no_grad():
            scores = head(torch.from_numpy(features).to(device)).float().cpu().numpy()
        return features, scores

    # --- protocol: persistence -----------------------------------------------------------

    def save_predictor(self, predictor: IndepPredictor) -> bytes:
        buffer = io.BytesIO()
        state_dict = {k: v.detach().cpu() for k, v in predictor.model.state_dict().items()}
        torch.save(
            {
                "format": _FORMAT,
                "model": asdict(predictor.model_config),
                "augment": asdict(predictor.augment),
                "kind": predictor.kind,
                "state_dict": state_dict,
            },
            buffer,
        )
        return buffer.getvalue()

    def load_predictor(self, data: bytes, info: TaskInfo, ctx: TrialContext) -> IndepPredictor:
        try:
            blob = torch.load(io.BytesIO(data), map_location=ctx.device, weights_only=True)
        except Exception as exc:  # torch raises several unrelated types for bad bytes
            raise LearnerError(
                f"Cannot read an indep predictor for task {info.key!r}: {exc}. "
                "Was it written by IndepLearner.save_predictor?"
            ) from exc
        if not isinstance(blob, dict) or blob.get("format") != _FORMAT:
            raise LearnerError(
                f"The predictor bytes for task {info.key!r} are not an indep predictor "
                f"(format {_FORMAT}); was it written by another learner?"
            )
        model_cfg = ModelConfig(**blob["model"])
        aug_cfg = AugmentConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in blob["augment"].items()})
        model = build_model(model_cfg)
        model.load_state_dict(blob["state_dict"])
        model.to(ctx.device).eval()
        ctx.track(model)
        return IndepPredictor(
            model=model,
            feature_view=FeatureView(model),
            model_config=model_cfg,
            augment=aug_cfg,
            kind=str(blob["kind"]),
            twin=InferenceTwin(model, FeatureView),
        )

    # --- what fine-tuning learners change ------------------------------------------------

    def _initial_predictor(self, view: TaskView, options: TrialOptions, ctx: TrialContext) -> IndepPredictor:
        """The network a trial starts from: a fresh one (``indep``); FT learners override it."""
        return self._new_predictor(view.info, ctx, options)

    def _auxiliary_objective(
        self,
        view: TaskView,
        predictor: IndepPredictor,
        config: Mapping[str, Any],
        ctx: TrialContext,
        generator: torch.Generator,
    ) -> AuxiliaryObjective | None:
        """An extra loss added at every step (MT's auxiliary tasks); none for ``indep``."""
        return None

    # --- helpers -------------------------------------------------------------------------

    def _new_predictor(self, info: TaskInfo, ctx: TrialContext, options: TrialOptions | None = None) -> IndepPredictor:
        options = options or TrialOptions(architecture=self.model_name)
        model_cfg = ModelConfig(options.architecture, info.num_classes, self.width)
        model = build_model(model_cfg).to(ctx.device)
        return IndepPredictor(
            model=model,
            feature_view=FeatureView(model),
            model_config=model_cfg,
            augment=options.augment(info.image_size),
            kind=info.kind,
        )

    def _run(
        self, predictor: IndepPredictor, module: nn.Module, images: np.ndarray, ctx: TrialContext, width: int
    ) -> np.ndarray:
        """``module`` over ``images`` in batches, in eval mode, without gradients."""
        if len(images) == 0:
            return np.zeros((0, width), dtype=np.float32)
        twin = _twin(predictor)
        if twin is not None:  # a loaded network, unchanged since: its folded channels-last copy
            module = twin.model if module is predictor.model else twin.view
        fn = ctx.track(module)
        device = next(predictor.model.parameters()).device  # wherever it was built or loaded
        outputs = []
        with eval_mode(predictor.model), torch.no_grad():
            for start in range(0, len(images), self.eval_batch):
                chunk = images[start : start + self.eval_batch]
                x = eval_transform(chunk, predictor.augment, device=device)
                outputs.append(fn(twin.input(x) if twin is not None else x).float().cpu())
        return torch.cat(outputs).numpy()


def _twin(predictor: IndepPredictor) -> Twin | None:
    """The loaded network's inference copy, where it has one and its weights are unchanged."""
    return predictor.twin.get(predictor.model) if predictor.twin is not None else None


__all__ = ["AuxiliaryObjective", "IndepLearner", "IndepPredictor"]
