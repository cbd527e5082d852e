"""Learners for the ruleset tests (issue 50), importable by Ray workers as ``module:factory``.

- ``BudgetIgnorer``: reports a fixed, large FLOP count at every step and never looks at the
  task's budget, so only the harness can hold it to a ``budget-<X>`` cap.
- ``PreparingIgnorer``: the same, with a ``prepare_task`` that spends once per task.
- ``ConfigRecorder``: declares a search space and keeps the configs its trials got in its
  state, so a test can see that ``self-tuning`` gave it none.
"""

from __future__ import annotations

from nevis_test_learners import NearestMeanLearner, _flat

from workers.learners.protocol import LogUniform, TrainOutput

STEP_FLOPS = 10**9
"""What one step of the budget ignorer reports."""
BUDGET = 25 * STEP_FLOPS
"""The cap its test runs it under (budget-2.5e+10): two and a half trials of ten steps."""


class BudgetIgnorer(NearestMeanLearner):
    name = "budget-ignorer"

    def train(self, view, state, config, ctx):
        if view.info.flop_budget != BUDGET:  # the cap is in the view, to plan by (this one does not)
            raise RuntimeError(f"the task view shows a budget of {view.info.flop_budget}, not {BUDGET}")
        x = _flat(view.train().images[:8])
        for step in range(1, ctx.steps + 1):
            ctx.report_flops(STEP_FLOPS)
            ctx.progress(step, x, loss=1.0 / step)
        return super().train(view, state, {"shrink": config.get("shrink", 0.0)}, _Quiet(ctx))

    def predict(self, predictor, images, ctx):  # free: the test counts the steps only
        x = _flat(images)
        return -((x[:, None, :] - predictor[None, :, :]) ** 2).sum(axis=2)


class PreparingIgnorer(BudgetIgnorer):
    """The budget ignorer with a ``prepare_task`` that spends ten steps' FLOPs once per task
    (as FT-d's choice among earlier models does): the cap must hear it before any trial."""

    name = "preparing-ignorer"

    def prepare_task(self, view, state, ctx):
        ctx.report_flops(PREPARATION_FLOPS)
        ctx.progress(0, None)  # a FLOP report goes to the harness
        return {"prepared": True}


PREPARATION_FLOPS = 10 * STEP_FLOPS


class _Quiet:
    """The trial's context for the fitting pass: its progress calls and FLOPs not counted again."""

    def __init__(self, ctx):
        self._ctx, self.steps = ctx, 0

    def report_flops(self, flops):
        pass

    def progress(self, step, predictor, *, loss=None):
        pass


class ConfigRecorder(NearestMeanLearner):
    name = "config-recorder"

    def search_space(self):
        return {"shrink": LogUniform(0.01, 0.5)}

    def train(self, view, state, config, ctx):
        out = super().train(view, state, {"shrink": float(config.get("shrink", 0.0))}, ctx)
        return TrainOutput(out.predictor, {**out.state, "configs": [*state.get("configs", []), dict(config)]})


def budget_ignorer() -> BudgetIgnorer:
    return BudgetIgnorer()


def preparing_ignorer() -> PreparingIgnorer:
    return PreparingIgnorer()


def config_recorder() -> ConfigRecorder:
    return ConfigRecorder()
