"""Probe settings: validation with clear messages, presets, stable identity, round trips."""

from __future__ import annotations

import pytest

from services.core.errors import UnknownNameError
from services.store.probes.settings import ProbeSettings, ProbeSettingsError


def test_full_settings_follow_metrics_md_defaults() -> None:
    s = ProbeSettings.preset("full")
    assert s == ProbeSettings()
    assert (s.folds, s.lidar_n, s.lidar_q, s.lidar_delta, s.lidar_eps, s.rankme_eps) == (5, 1000, 50, 1e-4, 1e-8, 1e-7)
    assert (s.patience, s.min_delta, s.kinds, s.targets) == (3, 0.0, ("linear", "mlp2", "mlp3"), "earlier")
    assert s.other_trials is None and s.other_checkpoints is None  # every checkpoint of every trial


def test_standard_settings_probe_the_chosen_trial_and_one_other_with_a_smaller_lidar() -> None:
    s = ProbeSettings.standard()
    assert (s.other_trials, s.other_checkpoints, s.max_earlier, s.lidar_n, s.lidar_q, s.mlp_hidden, s.mlp_steps) == (
        1,
        2,
        3,
        150,
        4,
        32,
        100,
    )
    assert (
        s.with_changes(
            lidar_n=1000,
            lidar_q=50,
            other_trials=None,
            other_checkpoints=None,
            max_earlier=None,
            mlp_hidden=64,
            mlp_steps=150,
        )
        == ProbeSettings.full()
    )
    assert ProbeSettings.full().max_earlier is None  # publish: every earlier task
    assert ProbeSettings.standard(other_trials=None).other_trials is None  # all on request


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_other_checkpoints_is_none_or_a_positive_int(bad) -> None:
    with pytest.raises(ProbeSettingsError, match="other_checkpoints"):
        ProbeSettings(other_checkpoints=bad)


def test_ci_preset_is_small_and_overridable() -> None:
    s = ProbeSettings.preset("ci", lidar_q=3)
    assert s.folds == 3 and s.lidar_n < 100 and s.lidar_q == 3 and s.max_examples <= 500


def test_the_hash_names_the_content_not_the_object() -> None:
    a, b = ProbeSettings(), ProbeSettings(kinds=["linear", "mlp2", "mlp3"])
    assert a.settings_hash == b.settings_hash and len(a.settings_hash) == 16
    assert ProbeSettings(folds=4).settings_hash != a.settings_hash


def test_settings_round_trip_through_their_dict() -> None:
    s = ProbeSettings.ci(max_earlier=2, kinds=("linear",))
    again = ProbeSettings.from_dict(s.to_dict())
    assert again == s and again.settings_hash == s.settings_hash


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"folds": 1}, r"'folds' parameter of ProbeSettings must be an int in \[2, inf\)\. Got 1"),
        ({"lidar_q": True}, r"'lidar_q' .* Got True instead"),
        ({"kinds": ()}, r"'kinds' .* non-empty"),
        ({"kinds": ("linear", "linear")}, r"'kinds' .* distinct"),
        ({"linear_l2": -1.0}, r"'linear_l2' .* \[0, inf\)"),
        ({"lidar_delta": -1e-4}, r"'lidar_delta' .* \[0, inf\)"),
        ({"max_examples": 6, "folds": 5}, r"'max_examples' .* at least 2 \* folds \(10\)"),
        ({"max_earlier": -1}, r"'max_earlier' .* None or an int"),
    ],
)
def test_bad_settings_are_refused_with_the_parameter_named(changes, message) -> None:
    with pytest.raises(ProbeSettingsError, match=message):
        ProbeSettings(**changes)


def test_unknown_names_get_a_did_you_mean() -> None:
    with pytest.raises(UnknownNameError, match=r"Unknown probe kind 'mlp4'. Did you mean 'mlp3', 'mlp2'"):
        ProbeSettings(kinds=("linear", "mlp4"))
    with pytest.raises(UnknownNameError, match=r"probe preset 'cj'.*'ci'"):
        ProbeSettings.preset("cj")
    with pytest.raises(ProbeSettingsError, match=r"Unknown probe settings \['flods'\]"):
        ProbeSettings.from_dict({"flods": 3})


def test_the_cli_options_pick_the_trials_and_checkpoints() -> None:
    from services.cli.probe_cmd import build_settings

    standard = build_settings("standard")
    assert (standard.other_trials, standard.other_checkpoints) == (1, 2)
    assert (
        build_settings("standard", other_checkpoints=3, other_trials=2).to_dict()
        == ProbeSettings.standard(other_trials=2, other_checkpoints=3).to_dict()
    )
    every = build_settings("standard", all_trials=True, other_trials=2, other_checkpoints=3)
    assert (every.other_trials, every.other_checkpoints) == (None, None)  # --all-trials wins
    assert build_settings("full") == ProbeSettings.full()
    assert build_settings("standard", all_earlier=True).max_earlier is None  # --all-earlier
    assert build_settings("standard", max_earlier=1).max_earlier == 1


@pytest.mark.parametrize("value", ["0.1", None, [1.0], float("-inf")])
def test_a_float_setting_of_the_wrong_type_is_refused_by_name(value) -> None:
    # Before: a string or None reached the range comparison and raised a bare TypeError.
    with pytest.raises(ProbeSettingsError, match="'min_delta' parameter"):
        ProbeSettings(min_delta=value)
