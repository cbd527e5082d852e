"""FT-prev, FT-d and MT on real networks: what they start from, what they choose, what they pay.

The past of the current task (digits, order 2) is built from real predictors: one trained on
digits (a planted related task, order 0) and one whose backbone is dead (constant features:
an unrelated task, order 1). Predictors reach the learner only as bytes through the view.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest
import torch

from services.core.errors import CausalityError, LearnerError
from workers.learners.finetune import AUX_WEIGHT, FtDLearner, FtPrevLearner, MtLearner, fresh_wins
from workers.learners.indep import IndepLearner
from workers.learners.loading import load_learner
from workers.learners.pretrained import PtFtSelfLearner, PtSelfLearner
from workers.learners.selection import RANDOM_INIT, NeighbourScores, probe_features, probe_subset, rank_candidates
from workers.learners.trial_options import TrialOptions
from workers.stream.task_view import CausalTaskView

from .conftest import RecordingContext

CONFIG = {"learning_rate": 0.05, "label_smoothing": 0.0}
WIDTH = 16


@pytest.fixture(scope="module")
def related_bytes(digits) -> bytes:
    """A predictor trained on digits: features that separate the current task's classes."""
    learner = IndepLearner("small_cnn", width=WIDTH)
    ctx = RecordingContext(seed=0, steps=120)
    view = CausalTaskView(digits.info, digits.train, digits.test, {}, lambda o: digits.train, 1)
    # Whole digits: the reference's crops (down to 8 % of the area) keep ~2 of 8 source pixels
    # a side, too little for 120 steps to plant features that transfer.
    config = {**CONFIG, "random_crop": False}
    return learner.save_predictor(learner.train(view, None, config, ctx).predictor)


@pytest.fixture(scope="module")
def dead_bytes(digits) -> bytes:
    """A predictor whose backbone outputs zeros for every image: nothing to transfer."""
    learner = IndepLearner("small_cnn", width=WIDTH)
    predictor = learner._new_predictor(digits.info, RecordingContext())
    with torch.no_grad():
        for name, param in predictor.model.named_parameters():
            if not name.startswith("head."):
                param.zero_()
    return learner.save_predictor(predictor)


def view_with_past(digits, past_bytes: dict[int, bytes]) -> CausalTaskView:
    """The current task (order 2) with earlier tasks whose predictors are ``past_bytes``."""
    current = replace(digits.info, order=2, key="t2")
    past = {order: replace(digits.info, order=order, key=f"t{order}") for order in past_bytes}
    return CausalTaskView(
        current,
        digits.train,
        digits.test,
        past,
        lambda o: digits.train,
        3,
        load_past_predictor=lambda order: past_bytes[order],
    )


def test_the_registry_knows_the_transfer_baselines():
    assert isinstance(load_learner("ft_prev"), FtPrevLearner)
    assert isinstance(load_learner("ft_d"), FtDLearner)
    assert isinstance(load_learner("mt"), MtLearner)
    assert AUX_WEIGHT in load_learner("mt").search_space()
    assert AUX_WEIGHT in load_learner("mt_small").search_space()
    assert load_learner("mt_small", {"aux_tasks": 1}).aux_tasks == 1  # options pass through


def pretrained_view(digits, pretrained: bytes) -> CausalTaskView:
    """The first task of a run submitted with the checkpoint ``pretrained``."""
    return CausalTaskView(
        digits.info, digits.train, digits.test, {}, lambda o: digits.train, 1, load_pretrained=lambda: pretrained
    )


@pytest.mark.parametrize("learner", [PtSelfLearner, PtFtSelfLearner])
def test_a_pt_learner_refuses_a_checkpoint_of_another_network_naming_both(digits, related_bytes, learner):
    """A ResNet-34 PT learner (``pt_self`` / ``pt_ft_self``) given a small-CNN checkpoint (what
    ``nevis pretrain --learner ft_prev_small`` makes) stops before training, naming both networks
    and how to make a matching checkpoint. Kept cheap: a narrow ResNet-34, no step taken."""
    ctx = RecordingContext(seed=7, steps=1)
    with pytest.raises(LearnerError) as info:
        learner("resnet34", width=4).train(pretrained_view(digits, related_bytes), None, CONFIG, ctx)
    message = str(info.value)
    assert f"small_cnn (width {WIDTH})" in message and "resnet34 (width 4)" in message, message
    assert "pretrained checkpoint was made with another network" in message
    assert "ft_prev_small" in message
    assert ("progress", 1) not in ctx.events  # nothing trained


def test_a_pt_learner_fine_tunes_a_checkpoint_of_its_own_network(digits, related_bytes):
    ctx = RecordingContext(seed=7, steps=1)
    view = pretrained_view(digits, related_bytes)
    learner = PtSelfLearner("small_cnn", width=WIDTH)
    start = learner._initial_predictor(view, TrialOptions(learner.model_name), ctx).model.state_dict()
    pretrained = learner.load_predictor(related_bytes, view.info, ctx).model.state_dict()
    assert all(torch.equal(w, start[k]) for k, w in pretrained.items() if not k.startswith("head."))


def test_ft_d_picks_the_planted_related_task(digits, related_bytes, dead_bytes):
    learner = FtDLearner("small_cnn", width=WIDTH)
    ctx = RecordingContext(seed=1, steps=1)
    view = view_with_past(digits, {0: related_bytes, 1: dead_bytes})
    fresh = learner._new_predictor(view.info, ctx)
    selection = learner.select(view, ctx, fresh)
    errors = {s.order: s.error for s in selection.ranking}
    assert selection.chosen == 0, errors
    assert set(errors) == {0, 1}  # the earlier tasks only: the fresh network is scored apart
    assert errors[0] < selection.fresh_error < errors[1], (errors, selection.fresh_error)
    assert not selection.fresh_would_win
    assert ("track", "NeighbourScores") in ctx.events
    assert ctx.meter.measured > 0  # features of two candidates, the fresh network and the neighbour search


def test_ft_d_never_starts_from_a_fresh_network_after_the_first_task(digits, dead_bytes):
    """As the reference: a fresh network that would score best is recorded, not chosen."""
    learner = FtDLearner("small_cnn", width=WIDTH)
    ctx = RecordingContext(seed=1, steps=2)
    view = view_with_past(digits, {1: dead_bytes})
    out = learner.train(view, None, CONFIG, ctx)
    record = out.state[2]
    assert record["chosen"] == 1
    assert set(record["knn_error"]) == {1}
    assert record["fresh_error"] < record["knn_error"][1]
    assert record["fresh_would_win"] is True and fresh_wins(out.state) == 1
    start = learner._initial_predictor(view, TrialOptions(learner.model_name), ctx).model.state_dict()
    dead = learner.load_predictor(dead_bytes, view.past_tasks()[0], ctx).model.state_dict()
    assert all(torch.equal(w, start[k]) for k, w in dead.items() if not k.startswith("head."))


def test_include_fresh_makes_the_fresh_network_a_candidate_again(digits, dead_bytes):
    learner = load_learner("ft_d_small", {"include_fresh": True, "width": WIDTH})
    ctx = RecordingContext(seed=1, steps=2)
    view = view_with_past(digits, {1: dead_bytes})
    out = learner.train(view, None, CONFIG, ctx)
    assert out.state[2]["chosen"] == RANDOM_INIT
    assert set(out.state[2]["knn_error"]) == {RANDOM_INIT, 1}
    assert out.state[2]["fresh_would_win"] is True
    with pytest.raises(TypeError, match="include_fresh"):
        FtDLearner("small_cnn", include_fresh="yes")  # type: ignore[arg-type]


def test_ft_d_selection_is_made_once_per_task_and_charged_once(digits, related_bytes, dead_bytes):
    learner = FtDLearner("small_cnn", width=WIDTH)
    view = view_with_past(digits, {0: related_bytes, 1: dead_bytes})
    first, second = RecordingContext(seed=1, steps=1), RecordingContext(seed=2, steps=1)
    learner.train(view, None, CONFIG, first)
    learner.train(view, None, CONFIG, second)
    assert ("track", "NeighbourScores") in first.events
    assert ("track", "NeighbourScores") not in second.events
    assert first.meter.measured > second.meter.measured


def test_ft_d_prepares_its_selection_once_and_its_trials_read_it_from_the_view(digits, related_bytes, dead_bytes):
    """The harness calls prepare_task once per task; a trial given its result selects nothing."""
    learner = FtDLearner("small_cnn", width=WIDTH)
    past = {0: related_bytes, 1: dead_bytes}
    prep = RecordingContext(seed=2, steps=1)
    selection = pickle.loads(pickle.dumps(learner.prepare_task(view_with_past(digits, past), None, prep)))
    assert selection.chosen == 0 and ("track", "NeighbourScores") in prep.events and prep.meter.measured > 0
    view = view_with_past(digits, past)
    prepared = CausalTaskView(
        view.info,
        digits.train,
        digits.test,
        {o: t for o, t in enumerate(view.past_tasks())},
        lambda o: digits.train,
        3,
        load_past_predictor=lambda order: past[order],
        prepared=selection,
    )
    for seed in (1, 2):  # two trials in fresh processes (fresh learners): neither pays for the probe
        trial = RecordingContext(seed=seed, steps=1)
        out = FtDLearner("small_cnn", width=WIDTH).train(prepared, None, CONFIG, trial)
        assert ("track", "NeighbourScores") not in trial.events
        assert out.state[2] == selection.record()
    assert (
        learner.prepare_task(
            CausalTaskView(digits.info, digits.train, digits.test, {}, lambda o: digits.train, 1),
            None,
            RecordingContext(),
        )
        is None
    )  # the first task: nothing to choose from


def test_ft_prev_starts_from_the_previous_backbone_with_a_fresh_head(digits, related_bytes, dead_bytes):
    learner = FtPrevLearner("small_cnn", width=WIDTH)
    ctx = RecordingContext(seed=3, steps=1)
    view = view_with_past(digits, {0: dead_bytes, 1: related_bytes})  # 1 is the previous task
    start = learner._initial_predictor(view, TrialOptions(learner.model_name), ctx).model.state_dict()
    previous = learner.load_predictor(related_bytes, view.past_tasks()[-1], ctx).model.state_dict()
    for name, weights in previous.items():
        if name.startswith("head."):
            assert not torch.equal(weights, start[name]), name
        else:
            assert torch.equal(weights, start[name]), name


def test_ft_prev_on_the_first_task_is_indep(digits):
    view = CausalTaskView(digits.info, digits.train, digits.test, {}, lambda o: digits.train, 1)
    ctx_ft, ctx_indep = RecordingContext(seed=4, steps=3), RecordingContext(seed=4, steps=3)
    a = FtPrevLearner("small_cnn", width=WIDTH).train(view, None, CONFIG, ctx_ft).predictor.model.state_dict()
    b = IndepLearner("small_cnn", width=WIDTH).train(view, None, CONFIG, ctx_indep).predictor.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_past_predictors_are_causal(digits, related_bytes):
    view = view_with_past(digits, {0: related_bytes})
    with pytest.raises(CausalityError, match="not in the past"):
        view.past_predictor(2)
    with pytest.raises(CausalityError, match="not an earlier task"):
        view.past_predictor(1)
    with pytest.raises(TypeError):
        view.past_predictor("0")  # type: ignore[arg-type]


def test_mt_adds_weighted_auxiliary_losses_and_drops_their_heads(digits, related_bytes, dead_bytes):
    view = view_with_past(digits, {0: related_bytes, 1: dead_bytes})
    losses = {}
    for weight in (0.2, 0.6):
        learner = MtLearner("small_cnn", width=WIDTH, aux_tasks=1)
        ctx = RecordingContext(seed=5, steps=2)
        predictor = learner._initial_predictor(view, TrialOptions(learner.model_name), ctx)
        aux = learner._auxiliary_objective(view, predictor, {AUX_WEIGHT: weight}, ctx, torch.Generator().manual_seed(0))
        torch.manual_seed(0)
        with torch.no_grad():
            for head in aux.heads:
                head.weight.fill_(0.01)
                head.bias.zero_()
        losses[weight] = float(aux.loss().detach())
    assert losses[0.6] == pytest.approx(3 * losses[0.2], rel=1e-5)

    ft_ctx, mt_ctx = RecordingContext(seed=6, steps=3), RecordingContext(seed=6, steps=3)
    FtDLearner("small_cnn", width=WIDTH).train(view, None, CONFIG, ft_ctx)
    mt = MtLearner("small_cnn", width=WIDTH, aux_tasks=1)
    out = mt.train(view, None, {**CONFIG, AUX_WEIGHT: 0.5}, mt_ctx)
    assert mt_ctx.meter.measured > ft_ctx.meter.measured  # the auxiliary passes are paid for
    reloaded = mt.load_predictor(mt.save_predictor(out.predictor), view.info, mt_ctx)
    assert reloaded.model.head.out_features == view.info.num_classes
    assert not any("aux" in name for name in reloaded.model.state_dict())


def test_rank_candidates_orders_by_knn_error_and_keeps_candidate_order_on_ties(digits):
    """The reference's order: equal errors go to the candidate listed first (the earliest task;
    the fresh network, listed last, loses every tie)."""
    subset = probe_subset(digits.train, digits.test, seed=0)
    onehot = np.eye(10, dtype=np.float32)
    lookup = {
        img.tobytes(): onehot[label]
        for data in (digits.train, digits.test)
        for img, label in zip(data.images, data.labels)
    }

    def zeros(images):
        return np.zeros((len(images), 4), np.float32)

    candidates = [
        (0, zeros),
        (3, lambda images: np.stack([lookup[i.tobytes()] for i in images])),
        (5, zeros),
        (RANDOM_INIT, zeros),
    ]
    ranking = rank_candidates(iter(candidates), subset, digits.info, NeighbourScores())
    assert [s.order for s in ranking] == [3, 0, 5, RANDOM_INIT]
    assert ranking[0].error == 0.0 and ranking[1].error == ranking[2].error == ranking[3].error


def test_probe_features_normalise_with_batch_statistics_and_leave_the_network_as_it_was(digits):
    """The reference embeds with ``is_training=True``: batch norm on each batch's statistics, so
    an image's features depend on its batch; the running statistics and modes are untouched."""
    learner = IndepLearner("small_cnn", width=WIDTH)
    predictor = learner._new_predictor(digits.info, RecordingContext())
    model = predictor.model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    images = digits.train.images[:300]

    def prepare(chunk):
        return torch.as_tensor(chunk).permute(0, 3, 1, 2).float().div(127.5).sub(1)

    feats = probe_features(predictor.feature_view, model, prepare, images, width=model.feature_dim)
    assert feats.shape == (300, model.feature_dim)
    assert not model.training and all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    reference = copy.deepcopy(model).train()  # the reference's forward: batch norm in training mode
    with torch.no_grad():
        first = reference.features(prepare(images[:128])).numpy()
    np.testing.assert_allclose(feats[:128], first, rtol=1e-4, atol=1e-5)
    alone = probe_features(predictor.feature_view, model, prepare, images[:10], width=model.feature_dim)
    assert not np.allclose(alone, feats[:10], atol=1e-4)  # other batch mates, other statistics
    last = probe_features(predictor.feature_view, model, prepare, images[:257], width=model.feature_dim)
    assert last.shape == (257, model.feature_dim)  # a lone last image joins the batch before
    assert probe_features(predictor.feature_view, model, prepare, images[:0], width=7).shape == (0, 7)
