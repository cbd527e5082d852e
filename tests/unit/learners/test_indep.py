"""The indep baseline end to end on a small real task (sklearn digits at 32x32)."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import LearnerError, UnknownNameError
from workers.learners.indep import IndepLearner
from workers.learners.protocol import PAPER_SEARCH_SPACE, LabelledData, Learner, Resources

from .conftest import RecordingContext, make_view, task_info

STEPS = 150
CONFIG = {"learning_rate": 0.05, "label_smoothing": 0.1}


@pytest.fixture(scope="module")
def learner() -> IndepLearner:
    return IndepLearner("small_cnn", width=16)


@pytest.fixture(scope="module")
def trained(learner, digits):
    ctx = RecordingContext(seed=0, steps=STEPS)
    view = make_view(digits.info, digits.train, digits.test)
    out = learner.train(view, learner.init_state(), CONFIG, ctx)
    return out, ctx


def test_indep_declares_the_paper_search_space_and_one_cpu(learner):
    assert isinstance(learner, Learner)
    assert learner.name == "indep"
    assert learner.search_space() == PAPER_SEARCH_SPACE
    assert learner.resources() == Resources(num_workers=1, cpus_per_worker=1.0, gpus_per_worker=0.0, gpu_optional=True)
    assert learner.init_state() is None


def test_the_registry_indep_is_the_paper_resnet34_asking_for_an_optional_gpu():
    from workers.learners.loading import load_learner

    paper, small = load_learner("indep"), load_learner("indep_small")
    assert (paper.model_name, small.model_name) == ("resnet34", "small_cnn")
    assert paper.resources() == Resources(num_workers=1, cpus_per_worker=1.0, gpus_per_worker=1.0, gpu_optional=True)
    assert small.resources().gpus_per_worker == 0.0


def test_trials_can_share_a_gpu_and_a_bad_share_is_named():
    from workers.learners.loading import load_learner

    assert load_learner("indep", {"trials_per_gpu": 4}).resources().gpus_per_worker == 0.25
    assert load_learner("ft_prev", {"trials_per_gpu": 2}).resources().gpus_per_worker == 0.5  # every baseline
    assert load_learner("indep_small", {"trials_per_gpu": 4}).resources().gpus_per_worker == 0.0
    for bad in (0, 65, 1.5, True):
        with pytest.raises(ValueError, match="'trials_per_gpu' parameter must be an int in"):
            IndepLearner(trials_per_gpu=bad)
    with pytest.raises(ValueError, match="the ranks of a multi-worker trial take a GPU each"):
        IndepLearner(trials_per_gpu=2, workers=2)


def test_training_on_digits_beats_chance_clearly(learner, trained, digits):
    out, ctx = trained
    scores = learner.predict(out.predictor, digits.test.images, ctx)
    assert scores.shape == (len(digits.test), 10)
    assert scores.dtype == np.float32
    error = float(np.mean(scores.argmax(1) != digits.test.labels))
    assert error < 0.5, f"test error {error:.3f} after {STEPS} steps"


def test_training_carries_no_state_and_reports_every_step(trained):
    out, ctx = trained
    assert out.state is None
    kinds = [kind for kind, _ in ctx.events]
    first_progress = kinds.index("progress")
    assert first_progress > 0 and set(kinds[:first_progress]) == {"track"}  # tracked first
    steps = [v for kind, v in ctx.events if kind == "progress"]
    assert steps == list(range(STEPS + 1))
    assert ctx.losses[0] is None and all(np.isfinite(ctx.losses[1:]))
    assert np.mean(ctx.losses[-20:]) < np.mean(ctx.losses[1:21])  # the loss went down


def test_features_are_the_penultimate_layer(learner, trained, digits):
    out, ctx = trained
    feats = learner.features(out.predictor, digits.test.images[:37], ctx)
    assert feats.shape == (37, 64)  # 4 · width after global pooling
    assert np.isfinite(feats).all()
    assert learner.features(out.predictor, digits.test.images[:0], ctx).shape == (0, 64)


def test_save_and_load_give_identical_predictions(learner, trained, digits):
    out, ctx = trained
    data = learner.save_predictor(out.predictor)
    assert isinstance(data, bytes)
    new_ctx = RecordingContext()
    loaded = learner.load_predictor(data, digits.info, new_ctx)
    assert new_ctx.events == [("track", "SmallCNN")]
    images = digits.test.images[:100]
    # A loaded predictor runs its folded channels-last copy (inference.py): the same function,
    # to float rounding.
    np.testing.assert_allclose(
        learner.predict(loaded, images, new_ctx), learner.predict(out.predictor, images, ctx), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        learner.features(loaded, images, new_ctx), learner.features(out.predictor, images, ctx), rtol=1e-5, atol=1e-5
    )


def test_every_pass_is_counted_by_the_context_that_ran_it(learner, trained, digits):
    out, ctx = trained
    counts = ctx.meter.snapshot()
    assert counts.forward > 0 and counts.backward > counts.forward  # backward ≈ 2x forward
    eval_ctx = RecordingContext()
    learner.predict(out.predictor, digits.test.images[:10], eval_ctx)
    after_predict = eval_ctx.meter.measured
    learner.features(out.predictor, digits.test.images[:10], eval_ctx)
    assert 0 < after_predict < eval_ctx.meter.measured
    assert eval_ctx.meter.snapshot().backward == 0
    assert ctx.meter.snapshot() == counts  # charged to the prediction's context only


def test_checkpoints_through_the_harness_context_load_back(learner, digits):
    from workers.sandbox.context import LocalTrialContext

    saved: dict[int, bytes] = {}
    ctx = LocalTrialContext(
        seed=1, steps=4, save_predictor=learner.save_predictor, on_checkpoint=saved.__setitem__, checkpoint_at=(0, 2, 4)
    )
    small = LabelledData(digits.train.images[:64], digits.train.labels[:64])
    out = learner.train(make_view(digits.info, small, small), None, CONFIG, ctx)
    assert sorted(saved) == [0, 2, 4] and ctx.missed_checkpoints == ()
    assert [p.step for p in ctx.curve] == [0, 1, 2, 3, 4]
    images = small.images[:8]
    untrained = learner.predict(learner.load_predictor(saved[0], digits.info, ctx), images, ctx)
    final = learner.predict(learner.load_predictor(saved[4], digits.info, ctx), images, ctx)
    np.testing.assert_allclose(final, learner.predict(out.predictor, images, ctx), rtol=1e-5, atol=1e-5)
    assert not np.allclose(untrained, final)


def test_load_rejects_bytes_that_are_not_an_indep_predictor(learner, digits):
    with pytest.raises(LearnerError, match="indep predictor"):
        learner.load_predictor(b"not a checkpoint", digits.info, RecordingContext())


def test_the_same_seed_trains_the_same_network(learner, digits):
    small = LabelledData(digits.train.images[:64], digits.train.labels[:64])
    view = make_view(digits.info, small, small)
    runs = [learner.train(view, None, CONFIG, RecordingContext(seed=3, steps=4)) for _ in range(2)]
    other = learner.train(view, None, CONFIG, RecordingContext(seed=4, steps=4))
    ctx = RecordingContext()
    a, b, c = (learner.predict(r.predictor, small.images[:16], ctx) for r in (*runs, other))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_multi_label_task_trains_with_bce_and_predicts_k_scores(learner):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 32, 32, 3), dtype=np.uint8)
    labels = (rng.random((40, 5)) < 0.3).astype(np.uint8)
    info = task_info(kind="multi", num_classes=5, n_train=40, n_dev=40)
    data = LabelledData(images, labels)
    ctx = RecordingContext(seed=0, steps=3)
    out = learner.train(make_view(info, data, data), None, CONFIG, ctx)
    scores = learner.predict(out.predictor, images[:7], ctx)
    assert scores.shape == (7, 5) and np.isfinite(scores).all()
    assert all(np.isfinite(ctx.losses[1:]))


def test_multi_label_task_with_integer_labels_is_a_clear_error(learner, digits):
    info = task_info(kind="multi", num_classes=10)
    small = LabelledData(digits.train.images[:8], digits.train.labels[:8])
    with pytest.raises(LearnerError, match="multi-hot"):
        learner.train(make_view(info, small, small), None, CONFIG, RecordingContext(steps=1))


def test_constructor_rejects_unknown_models_and_bad_options():
    with pytest.raises(UnknownNameError, match="small_cnn"):
        IndepLearner("small_cn")
    with pytest.raises(ValueError, match="warmup_fraction"):
        IndepLearner(warmup_fraction=2.0)
    with pytest.raises(ValueError, match="warmup_epochs"):
        IndepLearner(warmup_epochs=-1)


def test_the_best_weights_on_dev_are_returned_when_validations_happen(digits):
    """Validating every 10 of 40 steps at a learning rate that wrecks training late: the
    returned weights are those of the best validation, and its dev passes were charged."""
    view = make_view(digits.info, digits.train, digits.test)
    config = {"learning_rate": 0.05, "label_smoothing": 0.0}
    plain_ctx, checked_ctx = RecordingContext(seed=0, steps=40), RecordingContext(seed=0, steps=40)
    plain = IndepLearner("small_cnn", width=16).train(view, None, config, plain_ctx).predictor
    checked_learner = IndepLearner("small_cnn", width=16, validate_every=10)
    checked = checked_learner.train(view, None, config, checked_ctx).predictor

    def dev_error(learner, predictor):
        scores = learner.predict(predictor, digits.test.images, RecordingContext())
        return float(np.mean(scores.argmax(1) != digits.test.labels))

    assert dev_error(checked_learner, checked) <= dev_error(checked_learner, plain)
    assert checked_ctx.meter.measured > plain_ctx.meter.measured  # 3 validations + the final one
    with pytest.raises(ValueError, match="validate_every"):
        IndepLearner(validate_every=0)
