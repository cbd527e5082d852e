"""Early stopping of the built-in learners: the best weights on dev seen at validation steps.

Kept apart from the learner's training loop: one job (remember, compare, restore) that the
``indep`` family's loop calls at its validation steps.
"""

from __future__ import annotations

from typing import Any

from services.core.metrics import task_error
from workers.learners.protocol import TaskInfo, TrialContext


class BestOnDev:
    """The best weights on the dev split seen at validation steps (its passes are charged).

    Each validation is the harness's dev scoring (``ctx.dev_error``) where the context offers
    it, so the final weights' check is also the harness's dev pass of the returned predictor,
    not a second one; elsewhere (learner code run outside the harness) a pass of its own."""

    def __init__(self, learner: Any, predictor: Any, dev: Any, info: TaskInfo, ctx: TrialContext) -> None:
        self.learner, self.predictor, self.dev, self.info, self.ctx = learner, predictor, dev, info, ctx
        self.error, self.weights, self.step = float("inf"), None, -1

    def _dev_error(self) -> float:
        if len(self.dev) == 0:
            return float("inf")
        offered = getattr(self.ctx, "dev_error", None)
        error = offered(self.predictor) if callable(offered) else None
        if error is not None:
            return float(error)
        scores = self.learner.predict(self.predictor, self.dev.images, self.ctx)
        return task_error(scores, self.dev.labels, self.info.kind)

    def consider(self, step: int) -> None:
        error = self._dev_error()
        if error < self.error:
            state = self.predictor.model.state_dict()
            self.error, self.step = error, step
            self.weights = {k: v.detach().clone() for k, v in state.items()}

    def restore_if_better(self, final_step: int) -> None:
        """Keep the final weights unless an earlier validation beat them on dev."""
        if self.weights is None or self._dev_error() <= self.error:
            return
        self.predictor.model.load_state_dict(self.weights)


__all__ = ["BestOnDev"]
