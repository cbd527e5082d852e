"""BHPO's search space and the recipe choices it searches, honoured by every Indep-family trial."""

from __future__ import annotations

import pytest
import torch

from services.core.errors import LearnerError
from workers.learners import recipe
from workers.learners.bhpo import BHPO_SEARCH_SPACE, BhpoLearner
from workers.learners.indep import IndepLearner
from workers.learners.loading import load_learner
from workers.learners.models import LowResVGG, ModelConfig, build_model
from workers.learners.protocol import Choice, LogUniform, Uniform
from workers.learners.trial_options import TrialOptions

from .conftest import RecordingContext, make_view


def test_bhpo_searches_the_papers_seven_hyper_parameters():
    learner = load_learner("bhpo")
    assert isinstance(learner, BhpoLearner) and learner.preferred_search == "gp_ucb"
    space = learner.search_space()
    assert set(space) == {
        "learning_rate",
        "label_smoothing",
        "schedule",
        "batch_size",
        "architecture",
        "random_crop",
        "flip",
    }
    assert isinstance(space["learning_rate"], LogUniform) and isinstance(space["label_smoothing"], Uniform)
    assert space["architecture"] == Choice(("vgg", "resnet34"))
    assert space is BHPO_SEARCH_SPACE


def test_a_trial_honours_architecture_schedule_batch_crop_and_flip(digits):
    ctx = RecordingContext(seed=0, steps=2)
    config = {
        "learning_rate": 0.01,
        "architecture": "vgg",
        "schedule": "piecewise",
        "batch_size": 16,
        "random_crop": False,
        "flip": False,
    }
    out = IndepLearner("small_cnn", width=8).train(make_view(digits.info, digits.train, digits.test), None, config, ctx)
    predictor = out.predictor
    assert isinstance(predictor.model, LowResVGG) and predictor.model_config.name == "vgg"
    assert predictor.augment.flip_p == 0.0 and predictor.augment.scale == (1.0, 1.0)
    assert ctx.meter.measured > 0


def test_trial_options_refuse_nonsense_with_the_key_named():
    with pytest.raises(LearnerError, match="schedule"):
        TrialOptions.from_config({"schedule": "linear"}, "small_cnn")
    with pytest.raises(LearnerError, match="batch_size"):
        TrialOptions.from_config({"batch_size": 0}, "small_cnn")
    default = TrialOptions.from_config({}, "small_cnn")
    assert default == TrialOptions("small_cnn") and default.augment(32).flip_p == 0.5


def test_piecewise_schedule_steps_down_at_half_and_three_quarters_without_warmup():
    """The reference's piecewise_constant_progress_aligned: no warm-up, boundaries int(p · T)."""
    factors = [recipe.piecewise_factor(step, 100, 5) for step in (0, 4, 49, 50, 74, 75, 99)]
    assert factors == [1.0, 1.0, 1.0, 0.1, 0.1, 0.01, 0.01]
    assert [recipe.piecewise_factor(step, 101, 5) for step in (49, 50, 74, 75)] == [1.0, 0.1, 0.1, 0.01]


def test_vgg_gives_logits_and_penultimate_features():
    model = build_model(ModelConfig("vgg", 7, 8)).eval()
    x = torch.zeros(2, 3, 32, 32)
    assert model(x).shape == (2, 7) and model.features(x).shape == (2, 64)
