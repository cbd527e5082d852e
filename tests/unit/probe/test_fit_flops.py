"""The probe fits' FLOPs: what one FlopCounterMode around the same fits counts, without
changing a single result, and nothing counted (or slowed) outside ``counting()``."""

from __future__ import annotations

import numpy as np
import pytest
from torch.utils.flop_counter import FlopCounterMode

from services.store.probes.settings import ProbeSettings
from workers.probe.fits.fit_flops import counted, counting, repeated
from workers.probe.fits.probes import fit_probes_batched


def _features(groups: int = 2, n: int = 90, d: int = 12, classes: int = 3, multi: bool = False):
    rng = np.random.default_rng(0)
    labels = (rng.random((n, classes)) < 0.4).astype(np.int64) if multi else np.arange(n) % classes
    shift = labels if multi else np.eye(classes)[labels]
    x = rng.normal(size=(groups, n, d)) + 0.8 * np.pad(shift, ((0, 0), (0, d - classes)))[None]
    return x.astype(np.float32), labels


@pytest.mark.parametrize("multi", [False, True])
def test_counted_fits_match_one_flop_counter_around_them_and_give_the_same_scores(multi) -> None:
    features, labels = _features(multi=multi)
    settings = ProbeSettings(folds=3, mlp_hidden=8, mlp_steps=12, linear_max_iter=20)
    plain = fit_probes_batched(features, labels, num_classes=3, settings=settings)
    with counting() as tally:
        ours = fit_probes_batched(features, labels, num_classes=3, settings=settings)
    with FlopCounterMode(display=False) as mode:
        fit_probes_batched(features, labels, num_classes=3, settings=settings)
    assert tally.flops == mode.get_total_flops() > 0
    for a, b in zip(plain, ours):
        for kind in settings.kinds:
            np.testing.assert_array_equal(a[kind].losses, b[kind].losses)
            np.testing.assert_array_equal(a[kind].errors, b[kind].errors)


def test_more_steps_cost_proportionally_more() -> None:
    features, labels = _features(groups=1)
    base = dict(folds=3, kinds=("mlp2",), mlp_hidden=8)
    spent = []
    for steps in (5, 15, 25):
        with counting() as tally:
            fit_probes_batched(features, labels, num_classes=3, settings=ProbeSettings(mlp_steps=steps, **base))
        spent.append(tally.flops)
    assert spent[2] - spent[1] == spent[1] - spent[0] > 0  # ten Adam steps cost the same each time


def test_outside_counting_the_helpers_only_run_the_code() -> None:
    def step() -> int:
        return 3

    assert repeated(step) is step  # no wrapper, no dispatch mode: no cost at all
    with counted():
        pass
    with counting() as tally:
        wrapped = repeated(step)
        assert wrapped is not step and wrapped() == 3 and wrapped() == 3
    assert tally.flops == 0  # no matrix product in it
