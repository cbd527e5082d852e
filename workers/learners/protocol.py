"""The learner protocol: what a researcher implements, and what the harness gives back.

A learner is any object with the methods of :class:`Learner`. It is framework-neutral:
predictors and states are opaque to the harness, which only needs them picklable (state) or
serialisable to bytes (predictor, via ``save_predictor``).

Guarantees the harness keeps (see :mod:`workers.stream.task_view`):
- ``train`` receives a :class:`TaskView` with the current task's train and dev splits, the
  train splits of earlier tasks, and nothing else; asking for a future task or for any test
  split raises :class:`~services.core.errors.CausalityError`;
- ``predict`` and ``features`` receive images only, never labels;
- every forward/backward pass of a torch module is counted (one multiply-add = 2 FLOPs;
  element-wise ops, norms and the optimiser's update count 0): modules passed through
  ``ctx.track``, and during a trial or prediction job every other module call too, kept apart
  as *untracked* FLOPs (only the outermost call counts, never twice); functional code
  outside any module call and ``module.forward(...)`` are not seen. Learners in other
  frameworks call ``ctx.report_flops``.

A learner may also define ``prepare_task(view, state, ctx) -> Any`` (:class:`PreparesTask`):
work every trial of a task shares (FT-d's choice of the network to start from). The harness
calls it once per task, before the trials, in a learner host under the FLOP meter, charges
its FLOPs to the task once (so cFLOP does not depend on how many trials run at once), and
hands its result (pickled, at most ``MAX_PREPARED_BYTES``) to every trial as
``view.prepared``; without the hook, or where the harness does not call it (multi-worker
trials), ``view.prepared`` is ``None`` and ``train`` does the work itself. The hook sees the
same causal view a trial sees, with ``ctx.steps`` 1 and no checkpoints.

The probe pool calls ``load_predictor`` and ``features`` on saved checkpoints long after
training, in another process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, SupportsFloat, runtime_checkable

import numpy as np

from services.core.checkpoint_plan import CHECKPOINT_DEFAULT_FRACTIONS
from workers.stream.task_info import LabelledData, TaskInfo

# --- search spaces -----------------------------------------------------------------------


@dataclass(frozen=True)
class LogUniform:
    """A float drawn log-uniformly from [low, high]."""

    low: float
    high: float


@dataclass(frozen=True)
class Uniform:
    """A float drawn uniformly from [low, high]."""

    low: float
    high: float


@dataclass(frozen=True)
class Choice:
    """One of a fixed list of values."""

    values: tuple[Any, ...]


SearchDomain = LogUniform | Uniform | Choice

# The paper's search space for the baselines.
PAPER_SEARCH_SPACE: Mapping[str, SearchDomain] = {
    "learning_rate": LogUniform(1e-4, 1e-1),
    "label_smoothing": Uniform(0.0, 0.3),
}

# --- what the learner sees ---------------------------------------------------------------


@runtime_checkable
class TaskView(Protocol):
    """The causal view of the stream a learner gets while training task ``info``."""

    @property
    def info(self) -> TaskInfo: ...

    def train(self) -> LabelledData:
        """The current task's training split."""
        ...

    def dev(self) -> LabelledData:
        """The current task's dev split, for model selection and early stopping."""
        ...

    def past_tasks(self) -> tuple[TaskInfo, ...]:
        """Earlier tasks of the stream, in order."""
        ...

    def past_train(self, order: int) -> LabelledData:
        """The training split of an earlier task (its compute counts like any other)."""
        ...

    def past_predictor(self, order: int) -> bytes:
        """The predictor this run kept for an earlier task, as ``save_predictor`` wrote it.

        Earlier predictors stay in the object store and come one at a time, so a learner
        that reuses them (FT-prev, FT-d) carries nothing heavy in its state.
        """
        ...

    def pretrained(self) -> bytes:
        """The pretrained checkpoint the run was submitted with (``nevis run --pretrained``),
        in the format of the learner's ``save_predictor``; an error if the run has none."""
        ...

    @property
    def prepared(self) -> Any:
        """What the learner's ``prepare_task`` returned for this task (shared by its trials);
        ``None`` when it has none or the harness did not call it."""
        ...


@runtime_checkable
class TrialContext(Protocol):
    """What the harness offers learner code during one trial (or one prediction job)."""

    @property
    def seed(self) -> int: ...

    @property
    def steps(self) -> int:
        """The optimisation-step budget of this trial."""
        ...

    @property
    def world_size(self) -> int:
        """Number of workers of this trial (>1 only inside a Ray Train worker group)."""
        ...

    @property
    def rank(self) -> int: ...

    @property
    def device(self) -> str:
        """ "cpu" or "cuda:N": where this worker should put its tensors."""
        ...

    def track(self, module: Any) -> Any:
        """Count the FLOPs of every forward and backward pass of a torch module; returns it.

        In the learner host, module calls are counted even without ``track`` (as untracked
        FLOPs, measured the same way, exact as well). ``track`` still says which context is
        charged when several exist (a predictor loaded with one context and called with
        another), counts where no context watches untracked calls (learner code run outside
        the harness), and keeps the trial's FLOPs out of the untracked share. A plain method
        of a module (``model.features(x)``) runs no hook of its own: the module calls inside
        it are counted (as untracked), functional code written in it is not; wrap it in a
        module (:class:`~workers.learners.models.FeatureView`) so the whole pass is one call.
        """
        ...

    def report_flops(self, flops: int) -> None:
        """Add FLOPs measured by the learner itself (frameworks other than PyTorch)."""
        ...

    def progress(self, step: int, predictor: Any, *, loss: SupportsFloat | None = None) -> None:
        """Record the training curve at ``step``; checkpoints when the harness asks for one.
        ``loss`` may be a one-element tensor: the harness reads those in batches, so a step
        on a GPU never waits for its loss to reach the host (``float(loss)`` would)."""
        ...

    def dev_error(self, predictor: Any) -> float | None:
        """The current task's dev error of ``predictor``, scored by the harness (its ``predict``
        pass is charged as validation); ``None`` where the context offers no dev scoring.
        A trial that returns a predictor saved to the same bytes is not scored on dev again:
        validate the final weights with this, not with a pass of your own."""
        ...


# --- what the learner returns ------------------------------------------------------------


@dataclass(frozen=True)
class TrainOutput:
    """A trained predictor and the learner state to carry to the next task."""

    predictor: Any
    state: Any


@dataclass(frozen=True)
class Resources:
    """What one trial asks for. ``num_workers > 1`` runs it as that many ranks on one node, each
    in a learner host of its own under bubblewrap (a Ray Train worker group for trusted code
    without it), with ``torch.distributed`` set up before ``train``.

    ``gpu_optional`` makes ``gpus_per_worker`` a preference: the runner asks for the GPUs when
    the cluster has any and runs the trial on CPUs otherwise (so one learner serves a laptop
    and a GPU cluster); without it, a GPU ask on a cluster with none waits for one.
    """

    num_workers: int = 1
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    gpu_optional: bool = False


@runtime_checkable
class Learner(Protocol):
    """The interface a researcher implements. See the README for a complete example."""

    name: str

    def search_space(self) -> Mapping[str, SearchDomain]:
        """Hyper-parameters of a trial and where to draw them from."""
        ...

    def resources(self) -> Resources:
        """What one trial needs."""
        ...

    def init_state(self) -> Any:
        """The state before the first task (picklable)."""
        ...

    def train(self, view: TaskView, state: Any, config: Mapping[str, Any], ctx: TrialContext) -> TrainOutput:
        """Train on the task of ``view`` with hyper-parameters ``config``."""
        ...

    def predict(self, predictor: Any, images: np.ndarray, ctx: TrialContext) -> np.ndarray:
        """Class scores, shaped (N, num_classes): logits or probabilities; images only."""
        ...

    def features(self, predictor: Any, images: np.ndarray, ctx: TrialContext) -> np.ndarray:
        """The predictor's representation (penultimate features), shaped (N, d)."""
        ...

    def save_predictor(self, predictor: Any) -> bytes:
        """Serialise a predictor (for checkpoints and evaluation in another process)."""
        ...

    def load_predictor(self, data: bytes, info: TaskInfo, ctx: TrialContext) -> Any:
        """Rebuild a predictor saved by ``save_predictor``."""
        ...


@runtime_checkable
class PreparesTask(Protocol):
    """The optional hook of a learner whose trials share work on a task (FT-d's selection)."""

    def prepare_task(self, view: TaskView, state: Any, ctx: TrialContext) -> Any:
        """Work for every trial of the task, done once before them and charged once; the
        result (picklable, at most :data:`MAX_PREPARED_BYTES` pickled) is ``view.prepared``."""
        ...


MAX_PREPARED_BYTES = 64 * 1024**2
"""The most a pickled ``prepare_task`` result may hold: it travels to every trial."""

FlopsSource = Literal["measured", "reported"]

__all__ = [
    "CHECKPOINT_DEFAULT_FRACTIONS",
    "MAX_PREPARED_BYTES",
    "PAPER_SEARCH_SPACE",
    "Choice",
    "FlopsSource",
    "LabelledData",
    "Learner",
    "LogUniform",
    "PreparesTask",
    "Resources",
    "SearchDomain",
    "TaskInfo",
    "TaskView",
    "TrainOutput",
    "TrialContext",
    "Uniform",
]
