"""The training recipe: batch-size rule, warm-up + cosine schedule, optimiser, losses."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from workers.learners import recipe


@pytest.mark.parametrize(
    ("train_size", "expected"),
    [
        (1, 16),
        (1000, 16),  # p·D = 2.5 → 2, raised to the floor of 16
        (6400, 16),  # p·D = 16 exactly
        (12_799, 16),  # p·D just under 32
        (12_800, 32),
        (100_000, 128),  # p·D = 250 → 2^7
        (102_400, 256),
        (1_000_000, 512),  # 2048 capped at B = 512
    ],
)
def test_batch_size_follows_the_metrics_rule(train_size, expected):
    assert recipe.batch_size(train_size) == expected


def test_batch_size_respects_a_smaller_cap():
    assert recipe.batch_size(1_000_000, max_batch=64) == 64
    assert recipe.batch_size(1000, p=0.1) == 64


@pytest.mark.parametrize("bad", [0, -5, 2.5])
def test_batch_size_rejects_a_bad_train_size(bad):
    with pytest.raises(ValueError, match="train_size"):
        recipe.batch_size(bad)


def test_an_epoch_is_counted_as_the_reference_counts_it():
    assert recipe.steps_per_epoch(1000, 16) == 63  # 1000 // 16 + 1
    assert recipe.steps_per_epoch(1024, 16) == 65


def test_warmup_is_seven_epochs_strictly_inside_the_budget_as_the_reference():
    assert recipe.warmup_steps(50_000, 63) == 441  # 7 epochs of 63 updates
    assert recipe.warmup_steps(200, 63) == 199  # the reference's min(max_steps - 1, ...)
    assert recipe.warmup_steps(1, 63) == 0
    assert recipe.warmup_steps(1000, 63, epochs=2) == 126


def test_warmup_may_be_capped_at_a_share_of_the_budget():
    assert recipe.warmup_steps(200, 63, max_fraction=0.05) == 10
    assert recipe.warmup_steps(50_000, 63, max_fraction=0.05) == 441  # the epochs are fewer
    assert recipe.warmup_steps(150, 63, max_fraction=0.05) == 8
    with pytest.raises(ValueError, match="max_fraction"):
        recipe.warmup_steps(100, 10, max_fraction=1.5)
    with pytest.raises(ValueError, match="epochs"):
        recipe.warmup_steps(100, 10, epochs=-1)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.0),  # the reference's first update only fills the momentum buffer
        (5, 0.5),
        (9, 0.9),
        (10, 1.0),  # cosine starts at the peak
        (55, 0.5),  # half-way through the decay
        (100, 0.0),
        (150, 0.0),  # past the budget: stays at the end
    ],
)
def test_lr_factor_warms_up_linearly_then_decays_by_cosine(step, expected):
    assert recipe.lr_factor(step, total_steps=100, warmup=10) == pytest.approx(expected, abs=1e-12)


def test_lr_factor_matches_optax_warmup_cosine_decay_with_the_reference_floor():
    """optax 0.1.3: linear 0 → peak over ``warmup`` counts, then
    peak · ((1 − α) · 0.5 · (1 + cos(π · t / (T − warmup))) + α), α = end / peak."""
    peak, end, total, warmup = 0.1, 1e-8, 50, 7
    alpha = end / peak
    for step in range(total + 3):
        if step < warmup:
            expected = peak * step / warmup
        else:
            t = min(step - warmup, total - warmup)
            expected = peak * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * t / (total - warmup))) + alpha)
        assert peak * recipe.lr_factor(step, total, warmup, alpha) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_lr_factor_without_warmup_starts_at_the_peak():
    assert recipe.lr_factor(0, 10, 0) == 1.0
    assert recipe.lr_factor(5, 10, 0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))


def test_scheduler_applies_lr_factor_step_by_step_down_to_the_reference_final_rate():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = recipe.make_optimizer([param], 0.2)
    sched = recipe.make_scheduler(opt, total_steps=20, warmup=4)
    seen = []
    for _ in range(21):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    floor = recipe.FINAL_LEARNING_RATE / 0.2
    assert seen == pytest.approx([0.2 * recipe.lr_factor(s, 20, 4, floor) for s in range(21)])
    assert seen[-1] == pytest.approx(recipe.FINAL_LEARNING_RATE)


def test_optimizer_is_nesterov_sgd_with_the_paper_settings():
    opt = recipe.make_optimizer([torch.nn.Parameter(torch.zeros(3, 3))], 0.05)
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.SGD)
    assert group["nesterov"] is True
    assert group["momentum"] == 0.9
    assert group["weight_decay"] == 1e-4
    assert group["lr"] == 0.05
    with pytest.raises(ValueError, match="learning_rate"):
        recipe.make_optimizer([torch.nn.Parameter(torch.zeros(1))], 0.0)


def test_weight_decay_spares_batch_norm_and_biases_as_the_reference_mask_does():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(4, 2))
    opt = recipe.make_optimizer(net.parameters(), 0.1)
    decay = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    named = dict(net.named_parameters())
    assert decay[id(named["0.weight"])] == decay[id(named["2.weight"])] == 1e-4
    for name in ("0.bias", "1.weight", "1.bias", "2.bias"):
        assert decay[id(named[name])] == 0.0, name
    assert len(decay) == len(named)


def test_single_label_loss_is_label_smoothed_cross_entropy():
    logits = torch.tensor([[4.0, 0.0, -1.0], [0.5, 0.2, 3.0]])
    target = torch.tensor([0, 2])
    plain = recipe.make_loss("single", 0.0)(logits, target)
    smooth = recipe.make_loss("single", 0.2)(logits, target)
    assert plain == pytest.approx(F.cross_entropy(logits, target).item())
    assert smooth == pytest.approx(F.cross_entropy(logits, target, label_smoothing=0.2).item())
    assert smooth > plain  # confident right answers cost more when smoothed


def test_multi_label_loss_is_bce_on_targets_smoothed_towards_one_half():
    logits = torch.tensor([[2.0, -1.0, 0.0]])
    target = torch.tensor([[1, 0, 1]], dtype=torch.uint8)
    loss = recipe.make_loss("multi", 0.2)(logits, target)
    soft = torch.tensor([[0.9, 0.1, 0.9]])
    assert loss == pytest.approx(F.binary_cross_entropy_with_logits(logits, soft).item())


@pytest.mark.parametrize(("kind", "smoothing"), [("ranking", 0.0), ("single", 1.0), ("multi", -0.1)])
def test_make_loss_rejects_bad_arguments(kind, smoothing):
    with pytest.raises(ValueError):
        recipe.make_loss(kind, smoothing)
