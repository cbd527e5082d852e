"""The paper's transfer baselines: FT-prev, FT-d and MT (NEVIS'22, Section 5).

All of them train exactly like ``indep`` (same network, recipe, augmentation and search space:
by default the paper's ResNet-34, on a GPU where the cluster has one; the registry's ``_small``
names, e.g. ``ft_prev_small``, are the same learners on the small CNN, fast learners for smoke
runs and tests, not paper baselines) and differ only in where a trial starts and what else it
optimises:

- **FT-prev** starts from the predictor the run kept for the previous task;
- **FT-d** starts from the earlier predictor whose features serve the new task best under a
  k-NN probe (:mod:`workers.learners.selection`); as in the reference, a fresh network starts
  only the first task (``include_fresh=True`` makes it a candidate on every task), and is
  scored beside the candidates so the state records how often it would have won;
- **MT** starts like FT-d and also trains on the k most related earlier tasks, each with a
  head of its own, their losses weighted by λ (searched); the auxiliary heads are dropped
  at test time.

PT and PT+FT (:mod:`workers.learners.pretrained`) start from a pretrained checkpoint.

Earlier predictors are fetched one at a time through ``view.past_predictor`` (they live in
the object store), so the learner state stays a small record of which task each one chose.
Every pass of the selection (features of each candidate, the neighbour search) goes
through tracked modules, so its FLOPs are charged to the task; it runs in ``prepare_task``,
once per task whatever the number of trials running at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from services.core.errors import LearnerError
from workers.learners import recipe
from workers.learners.augment import eval_transform
from workers.learners.batch_crop import train_batch
from workers.learners.indep import IndepLearner, IndepPredictor
from workers.learners.models import MODELS
from workers.learners.protocol import (
    PAPER_SEARCH_SPACE,
    LogUniform,
    SearchDomain,
    TaskInfo,
    TaskView,
    TrainOutput,
    TrialContext,
)
from workers.learners.selection import (
    RANDOM_INIT,
    CandidateScore,
    FeatureFn,
    NeighbourScores,
    candidate_error,
    probe_features,
    probe_subset,
    rank_candidates,
)
from workers.learners.training import epoch_batches, label_tensor
from workers.learners.trial_options import TrialOptions

AUX_WEIGHT = "aux_weight"


EARLIER_MISMATCH = "an earlier task of this run was trained with another network."
"""Why FT-prev / FT-d cannot start from an earlier predictor (after the two networks are named)."""


def _network(predictor: IndepPredictor) -> tuple[str, int]:
    """The model's name and first-stage width (its default when none was given)."""
    config = predictor.model_config
    return config.name, config.width or MODELS[config.name][1]


def check_same_network(source: IndepPredictor, target: IndepPredictor, *, reason: str = EARLIER_MISMATCH) -> None:
    """Raise :class:`LearnerError` naming both networks unless ``source`` can start ``target``."""
    (source_name, source_width), (target_name, target_width) = _network(source), _network(target)
    if (source_name, source_width) != (target_name, target_width):
        raise LearnerError(
            f"Cannot fine-tune a {source_name} (width {source_width}) into a {target_name} "
            f"(width {target_width}): {reason}"
        )


def transfer_backbone(
    source: IndepPredictor, target: IndepPredictor, *, reason: str = EARLIER_MISMATCH
) -> IndepPredictor:
    """``target`` with every weight of ``source`` but the head (tasks differ in classes).

    Raises:
        LearnerError: the two are different networks (``reason`` says where ``source`` came
            from), or ``source``'s weights do not fit.
    """
    check_same_network(source, target, reason=reason)
    weights = {k: v for k, v in source.model.state_dict().items() if not k.startswith("head.")}
    missing, unexpected = target.model.load_state_dict(weights, strict=False)
    if unexpected or any(not k.startswith("head.") for k in missing):
        raise LearnerError(f"The earlier predictor does not fit: missing {missing}, unexpected {unexpected}.")
    return target


class FtPrevLearner(IndepLearner):
    """Fine-tune from the previous task's predictor (random initialisation on the first)."""

    name = "ft_prev"

    def __init__(self, model: str = "resnet34", **options: Any) -> None:
        super().__init__(model, **options)

    def _initial_predictor(self, view: TaskView, options: TrialOptions, ctx: TrialContext) -> IndepPredictor:
        past = view.past_tasks()
        fresh = self._new_predictor(view.info, ctx, options)
        if not past:
            return fresh
        previous = past[-1]
        source = self.load_predictor(view.past_predictor(previous.order), previous, ctx)
        return transfer_backbone(source, fresh)


@dataclass(frozen=True)
class Selection:
    """FT-d's ranking for one task: every candidate's k-NN error, best first, and the fresh
    network's (scored whether or not it is a candidate, as the reference scores it)."""

    task_key: str  # the task and run it was made for (see _selection_key)
    ranking: tuple[CandidateScore, ...]
    fresh_error: float

    @property
    def chosen(self) -> int:
        return self.ranking[0].order

    @property
    def fresh_would_win(self) -> bool:
        """Whether the fresh network beats every other candidate (it loses ties, as in the reference)."""
        others = [s.error for s in self.ranking if s.order != RANDOM_INIT]
        return bool(others) and self.fresh_error < min(others)

    def record(self) -> dict[str, Any]:
        """What the learner state keeps of it."""
        return {
            "chosen": self.chosen,
            "knn_error": {s.order: s.error for s in self.ranking},
            "fresh_error": self.fresh_error,
            "fresh_would_win": self.fresh_would_win,
        }


def fresh_wins(state: Mapping[int, Mapping[str, Any]] | None) -> int:
    """How many tasks of an FT-d / MT / PT+FT state the fresh network would have won."""
    return sum(bool(record.get("fresh_would_win")) for record in (state or {}).values())


class FtDLearner(IndepLearner):
    """Fine-tune from the most related earlier predictor, chosen by a k-NN probe.

    The selection runs once per task, in :meth:`prepare_task`, which the harness calls before
    the trials and charges once; every trial reads it from ``view.prepared``. Where nothing
    prepared it (multi-worker trials, a view outside a run) ``train`` selects itself, cached
    per learner process. Either way it is made on a subset fixed by the task, so every trial
    starts from the same choice. The state records each task's choice, its k-NN errors, the fresh
    network's and whether that would have won (:func:`fresh_wins` counts them).

    Args:
        include_fresh: make a fresh network a candidate on every task (it loses ties). Off by
            default: the reference never starts a task after the first from a fresh network.
        **options: :class:`~workers.learners.indep.IndepLearner`'s.
    """

    name = "ft_d"

    def __init__(self, model: str = "resnet34", *, include_fresh: bool = False, **options: Any) -> None:
        super().__init__(model, **options)
        if not isinstance(include_fresh, bool):
            raise TypeError(
                f"The 'include_fresh' parameter of {type(self).__name__} must be a bool. Got {include_fresh!r}."
            )
        self.include_fresh = include_fresh
        self._selection: Selection | None = None

    def train(self, view: TaskView, state: Any, config: Mapping[str, Any], ctx: TrialContext) -> TrainOutput:
        output = super().train(view, state, config, ctx)
        history = dict(state or {})
        selection = self._current_selection(view)
        if selection is not None:
            history[view.info.order] = selection.record()
        return TrainOutput(predictor=output.predictor, state=history)

    def prepare_task(self, view: TaskView, state: Any, ctx: TrialContext) -> Selection | None:
        """The task's selection, made once for all its trials (``None`` on a first task, where
        only a fresh network can start); the fresh network it scores is seeded by ``ctx.seed``."""
        if not self._has_candidates(view):
            return None
        torch.manual_seed(ctx.seed)
        return self._make_selection(view, ctx, self._new_predictor(view.info, ctx), self._selection_key(view))

    def _initial_predictor(self, view: TaskView, options: TrialOptions, ctx: TrialContext) -> IndepPredictor:
        fresh = self._new_predictor(view.info, ctx, options)
        if not self._has_candidates(view):
            return fresh
        chosen = self.select(view, ctx, fresh).chosen
        if chosen == RANDOM_INIT:
            return fresh
        return transfer_backbone(self._load_candidate(view, chosen, ctx), fresh)

    def _has_candidates(self, view: TaskView) -> bool:
        """Whether anything but a fresh network could be chosen (the first task has nothing)."""
        return bool(view.past_tasks())

    def _load_candidate(self, view: TaskView, order: int, ctx: TrialContext) -> IndepPredictor:
        info = next(t for t in view.past_tasks() if t.order == order)
        return self.load_predictor(view.past_predictor(order), info, ctx)

    def _selection_key(self, view: TaskView) -> str:
        """What identifies one task of one run: the task, and the digest of the run's latest
        predictor (two runs at the same task never share a selection)."""
        latest = view.past_tasks()[-1]
        return f"{view.info.key}@{digest(view.past_predictor(latest.order))}"

    def select(self, view: TaskView, ctx: TrialContext, fresh: IndepPredictor) -> Selection:
        """The task's selection: the one ``prepare_task`` made (``view.prepared``), else rank
        the candidates and score the fresh network here (cached per task)."""
        prepared = _prepared(view)
        if prepared is not None:
            return prepared
        key = self._selection_key(view)
        if self._selection is None or self._selection.task_key != key:
            self._selection = self._make_selection(view, ctx, fresh, key)
        return self._selection

    def _make_selection(self, view: TaskView, ctx: TrialContext, fresh: IndepPredictor, key: str) -> Selection:
        """Rank the candidates on this task and score the fresh network (every pass tracked)."""
        info = view.info
        subset = probe_subset(view.train(), view.dev(), seed=info.order)
        scorer = ctx.track(NeighbourScores())
        ranking = tuple(rank_candidates(self._candidates(view, ctx, fresh), subset, info, scorer))
        fresh_error = next((s.error for s in ranking if s.order == RANDOM_INIT), None)
        if fresh_error is None:  # not a candidate: scored for the record (one more network's passes)
            fresh_error = candidate_error(self._probe_features(fresh, ctx), subset, info, scorer)
        return Selection(task_key=key, ranking=ranking, fresh_error=fresh_error)

    def _current_selection(self, view: TaskView) -> Selection | None:
        """The selection made for this very task of this very run, if any."""
        if not self._has_candidates(view):
            return None
        prepared = _prepared(view)
        if prepared is not None:
            return prepared
        selection = self._selection
        if selection is None:
            return None
        return selection if selection.task_key == self._selection_key(view) else None

    def _candidates(self, view: TaskView, ctx: TrialContext, fresh: IndepPredictor) -> Iterator[tuple[int, FeatureFn]]:
        """The sources, then the fresh network where ``include_fresh`` (the reference's order:
        on equal errors the first listed wins)."""
        yield from self._sources(view, ctx, fresh)
        if self.include_fresh:
            yield RANDOM_INIT, self._probe_features(fresh, ctx)

    def _sources(self, view: TaskView, ctx: TrialContext, fresh: IndepPredictor) -> Iterator[tuple[int, FeatureFn]]:
        """Each earlier predictor, oldest first, loaded only when its turn comes."""
        for past in view.past_tasks():
            yield past.order, self._probe_features(self._load_candidate(view, past.order, ctx), ctx)

    def _probe_features(self, predictor: IndepPredictor, ctx: TrialContext) -> FeatureFn:
        """The predictor's features as the reference's probe takes them (batch statistics)."""
        view = ctx.track(predictor.feature_view)
        device = next(predictor.model.parameters()).device
        return lambda images: probe_features(
            view,
            predictor.model,
            lambda chunk: eval_transform(chunk, predictor.augment, device=device),
            images,
            width=predictor.model.feature_dim,
        )


def _prepared(view: TaskView) -> Selection | None:
    """The selection ``prepare_task`` made for this task, if the harness ran it."""
    prepared = getattr(view, "prepared", None)  # views of older callers have none
    return prepared if isinstance(prepared, Selection) else None


def digest(data: bytes) -> str:
    """A short digest of a checkpoint's bytes: what tells one run's selection from another's."""
    return hashlib.sha256(data).hexdigest()[:16]


class _AuxiliaryTasks:
    """MT's auxiliary objective: one mini-batch of each related earlier task per step."""

    def __init__(
        self,
        learner: IndepLearner,
        predictor: IndepPredictor,
        tasks: list[tuple[TaskInfo, Any]],
        weight: float,
        ctx: TrialContext,
        generator: torch.Generator,
    ) -> None:
        self.predictor, self.weight, self.ctx, self.generator = predictor, weight, ctx, generator
        self.features = ctx.track(predictor.feature_view)
        device = next(predictor.model.parameters()).device
        self.heads = nn.ModuleList(nn.Linear(predictor.model.feature_dim, info.num_classes) for info, _ in tasks)
        self.heads.to(device)
        self.tracked_heads = [ctx.track(head) for head in self.heads]
        self.tasks = [
            (
                info,
                data,
                label_tensor(data.labels, info),
                recipe.make_loss(info.kind),
                epoch_batches(
                    len(data), recipe.batch_size(len(data), max_batch=learner.max_batch), ctx.steps, generator
                ),
            )
            for info, data in tasks
        ]

    def parameters(self) -> Iterable[nn.Parameter]:
        return self.heads.parameters()

    def loss(self) -> torch.Tensor:
        total = torch.zeros((), device=self.ctx.device)
        for head, (_, data, labels, loss_fn, batches) in zip(self.tracked_heads, self.tasks, strict=True):
            idx = next(batches)
            source, extents = data.crop_source(idx.numpy())  # past originals, as on their own task
            x = train_batch(
                source, self.predictor.augment, generator=self.generator, device=self.ctx.device, extents=extents
            )
            total = total + loss_fn(head(self.features(x)), labels[idx].to(self.ctx.device))
        return self.weight * total


class MtLearner(FtDLearner):
    """FT-d's initialisation plus the ``aux_tasks`` most related earlier tasks as auxiliary data.

    Args:
        aux_tasks: k, how many related earlier tasks train alongside (those ranked best by
            FT-d's probe; the random network is not a task).
        **options: :class:`FtDLearner`'s (``include_fresh``: the start, as FT-d's) and
            :class:`~workers.learners.indep.IndepLearner`'s.
    """

    name = "mt"

    def __init__(self, model: str = "resnet34", *, aux_tasks: int = 2, **options: Any) -> None:
        super().__init__(model, **options)
        if not isinstance(aux_tasks, int) or aux_tasks < 1:
            raise ValueError(f"The 'aux_tasks' parameter of MtLearner must be an int in [1, inf). Got {aux_tasks!r}.")
        self.aux_tasks = aux_tasks

    def search_space(self) -> Mapping[str, SearchDomain]:
        return {**PAPER_SEARCH_SPACE, AUX_WEIGHT: LogUniform(0.01, 1.0)}

    def _auxiliary_objective(
        self,
        view: TaskView,
        predictor: IndepPredictor,
        config: Mapping[str, Any],
        ctx: TrialContext,
        generator: torch.Generator,
    ) -> _AuxiliaryTasks | None:
        selection = self._current_selection(view)
        if selection is None:
            return None  # the first task: nothing earlier to learn from
        related = [s.order for s in selection.ranking if s.order >= 0][: self.aux_tasks]  # tasks only
        infos = {t.order: t for t in view.past_tasks()}
        tasks = [(infos[order], view.past_train(order)) for order in related]
        if not tasks:
            return None
        return _AuxiliaryTasks(self, predictor, tasks, float(config.get(AUX_WEIGHT, 0.1)), ctx, generator)


__all__ = [
    "AUX_WEIGHT",
    "EARLIER_MISMATCH",
    "FtDLearner",
    "FtPrevLearner",
    "MtLearner",
    "Selection",
    "check_same_network",
    "digest",
    "fresh_wins",
    "transfer_backbone",
]
