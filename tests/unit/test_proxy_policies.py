"""The proxy replay's maths on hand-made numbers (services.core.proxy_policies)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.core.proxy_policies import (
    POLICIES,
    Policy,
    ReplayError,
    TaskRecord,
    TrialRecord,
    halving,
    replay_task,
    rung_steps,
    summarise,
)


def _trial(
    index: int, dev: float | None, lidar: dict[int, float], rankme: dict[int, float] | None = None, flops: float = 80.0
) -> TrialRecord:
    return TrialRecord(
        index, dev, flops, {"lidar": lidar, "rankme": rankme or lidar}, proxy_flops={step: 1.0 for step in lidar}
    )


def _task(order: int = 1, chosen: int = 0) -> TaskRecord:
    # Steps 80, rungs at 10 and 20. Dev prefers trial 0; LiDAR at the end prefers trial 3.
    trials = (
        _trial(0, 0.10, {10: 5.0, 20: 6.0, 80: 7.0}),
        _trial(1, 0.30, {10: 4.0, 20: 4.5, 80: 5.0}),
        _trial(2, 0.20, {10: 6.0, 20: 7.0, 80: 8.0}),
        _trial(3, 0.25, {10: 3.0, 20: 8.0, 80: 9.0}),
    )
    return TaskRecord(order, trials, chosen_index=chosen, flops=400.0, steps=80, rungs=(10, 20))


def test_rung_steps_are_the_eighth_and_quarter_checkpoints() -> None:
    assert rung_steps(80) == (10, 20)
    assert rung_steps(6) == (1, 2)  # rounded as checkpoint_steps rounds
    assert rung_steps(2) == ()  # both round to step 0, the untrained start: never a rung


def test_halving_is_ashas_rule_with_higher_better() -> None:
    # The first two always go on, the third within the best ceil(3/3)=1 of three, the fourth
    # within the best ceil(4/3)=2 of four.
    assert halving([5.0, 4.0, 6.0, 3.0]) == [True, True, True, False]
    assert halving([5.0, 4.0, 6.0, 7.0]) == [True, True, True, True]
    assert halving([5.0, 6.0, 4.0]) == [True, True, False]
    assert halving([1.0, 2.0, 3.0, math.nan]) == [True, True, True, False]  # nan is the worst


def test_dev_selection_is_the_committed_trial_at_the_tasks_own_cost() -> None:
    choice = replay_task(_task(), Policy("dev"))
    assert (choice.trial_index, choice.dev_error, choice.flops, choice.saved) == (0, 0.10, 400.0, 0.0)


def test_choosing_by_a_proxy_takes_the_highest_last_value_and_pays_its_passes() -> None:
    choice = replay_task(_task(), Policy("x", choose="lidar"))
    assert (choice.trial_index, choice.dev_error) == (3, 0.25)
    assert choice.proxy_flops == 4.0 and choice.flops == 404.0 and choice.saved == 0.0


def test_pruning_stops_trailing_trials_and_charges_their_steps_so_far() -> None:
    # Rung 10: [5, 4, 6, 3] → trial 3 stops (saves 80 × 70/80 = 70). Rung 20: [6, 4.5, 7] → all go
    # on (7 is the best of three). Dev chooses trial 0 among the survivors.
    choice = replay_task(_task(), Policy("x", prune="lidar"))
    assert choice.stopped == (3,)
    assert choice.saved == pytest.approx(70.0)
    assert choice.proxy_flops == 4.0 + 3.0
    assert choice.flops == pytest.approx(400.0 - 70.0 + 7.0)
    assert choice.trial_index == 0


def test_prune_and_choose_by_lidar_reads_no_dev_error() -> None:
    choice = replay_task(_task(), Policy("x", choose="lidar", prune="lidar"))
    assert choice.trial_index == 2 and choice.dev_error == 0.20  # trial 3 was pruned; 2 has the top LiDAR


def test_a_missing_proxy_value_names_the_task_trial_and_step() -> None:
    task = _task()
    holes = TaskRecord(2, (*task.trials[:3], _trial(3, 0.25, {80: 9.0})), 0, 400.0, 80, (10, 20))
    with pytest.raises(ReplayError, match="task 2: trial 3 has no lidar at step 10"):
        replay_task(holes, Policy("x", prune="lidar"))


def test_summary_gives_regret_and_savings_against_dev_over_replayable_tasks() -> None:
    task = _task()
    holes = TaskRecord(2, (*task.trials[:3], _trial(3, 0.25, {80: 9.0})), 0, 400.0, 80, (10, 20))
    rows, skipped = summarise([task, holes], POLICIES)
    assert len(skipped) == 1 and "task 2" in skipped[0]
    by = {r.policy: r for r in rows}
    assert by["dev"].regret == 0.0 and by["dev"].flops_saved == 0.0 and by["dev"].same_choice == 1
    assert by["choose:lidar"].regret == pytest.approx(0.15) and by["choose:lidar"].same_choice == 0
    assert by["prune:lidar"].flops_saved == pytest.approx(70.0 - 7.0)
    assert by["prune:lidar"].saved_fraction == pytest.approx(63.0 / 400.0)
    assert by["prune:lidar"].stopped_trials == 1
    assert by["prune+choose:lidar"].e_dev == pytest.approx(0.20)


def test_summary_refuses_when_no_task_can_be_replayed() -> None:
    lonely = TaskRecord(1, (_trial(0, None, {80: 1.0}),), 0, 1.0, 80, (10, 20))
    with pytest.raises(ReplayError, match="no task can be replayed"):
        summarise([lonely])


def test_held_out_scoring_removes_the_winners_curse_dev_scoring_hands_dev_selection() -> None:
    """200 tasks of 4 equally good trials (true error 0.30), each seen through independent dev
    and held-out noise (SD 0.02), LiDAR unrelated to either. On dev error, dev selection looks
    0.02 better than it is and a proxy's regret is large and positive by construction; on the
    held-out examples, dev selection scores the truth and the proxy's regret is noise around 0."""
    rng = np.random.default_rng(5)
    tasks = []
    for order in range(1, 201):
        dev, held, lidar = 0.30 + rng.normal(0, 0.02, 4), 0.30 + rng.normal(0, 0.02, 4), rng.normal(size=4)
        trials = tuple(
            TrialRecord(i, float(dev[i]), 80.0, {"lidar": {80: float(lidar[i])}}, heldout_error=float(held[i]))
            for i in range(4)
        )
        tasks.append(TaskRecord(order, trials, int(np.argmin(dev)), 320.0, 80, (10, 20)))
    rows, skipped = summarise(tasks, [Policy("dev"), Policy("choose:lidar", choose="lidar")])
    by = {r.policy: r for r in rows}
    assert skipped == [] and by["dev"].tasks == 200
    assert by["dev"].e_dev < 0.285  # the curse: the minimum of 4 noisy dev errors
    assert by["dev"].e_heldout == pytest.approx(0.30, abs=0.005) and by["dev"].regret_heldout == 0.0
    assert by["choose:lidar"].regret > 3.0  # Σ of 200 gaps of ≈ 0.02 each, all ≥ 0
    assert abs(by["choose:lidar"].regret_heldout) < 1.5  # unbiased: noise of SD ≈ 0.4 around 0
    assert by["choose:lidar"].e_heldout == pytest.approx(0.30, abs=0.008)


def test_held_out_figures_are_none_when_a_chosen_trial_was_not_measured() -> None:
    task = _task()
    rows, _ = summarise([task], [Policy("dev"), Policy("choose:lidar", choose="lidar")])
    assert all(r.e_heldout is None and r.regret_heldout is None for r in rows)
    measured = TaskRecord(
        1,
        tuple(
            TrialRecord(t.trial_index, t.dev_error, t.flops, t.proxies, t.proxy_flops, heldout_error=0.1 * i)
            for i, t in enumerate(task.trials)
        ),
        0,
        400.0,
        80,
        (10, 20),
    )
    rows, _ = summarise([measured], [Policy("dev"), Policy("choose:lidar", choose="lidar")])
    by = {r.policy: r for r in rows}
    assert by["dev"].e_heldout == 0.0 and by["choose:lidar"].e_heldout == pytest.approx(0.3)  # trial 3
    assert by["choose:lidar"].regret_heldout == pytest.approx(0.3)
