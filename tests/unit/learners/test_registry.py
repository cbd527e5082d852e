"""Finding learners: built-in names and 'module:factory' specs, with clear errors."""

from __future__ import annotations

import textwrap

import pytest

from services.core.errors import LearnerError, UnknownNameError
from workers.learners.indep import IndepLearner
from workers.learners.registry import builtin_names, load_learner

PLUGIN = textwrap.dedent(
    """
    from workers.learners.indep import IndepLearner

    class Half:
        name = "half"
        def search_space(self): return {}
        def train(self, view, state, config, ctx): return None

    def good(): return IndepLearner("small_cnn", width=8)
    def half(): return Half()
    def broken(): raise RuntimeError("no GPU here")
    not_callable = 3
    """
)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_learners_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_learners_plugin"


def test_builtin_names_resolve_to_configured_indep_learners():
    assert {"indep", "indep_resnet34"} <= set(builtin_names())
    assert isinstance(load_learner("indep"), IndepLearner)
    assert load_learner("indep_resnet34").model_name == "resnet34"
    assert load_learner("indep", {"width": 8}).width == 8


def test_unknown_learner_name_suggests_the_closest_builtin():
    with pytest.raises(UnknownNameError, match="Did you mean 'indep'") as info:
        load_learner("indpe")
    assert "module:factory" in str(info.value)


def test_module_factory_spec_is_imported_and_called(plugin):
    learner = load_learner(f"{plugin}:good")
    assert isinstance(learner, IndepLearner) and learner.width == 8


def test_factory_result_missing_methods_names_every_missing_one(plugin):
    with pytest.raises(LearnerError) as info:
        load_learner(f"{plugin}:half")
    message = str(info.value)
    for member in ("resources", "init_state", "predict", "features", "save_predictor",
                   "load_predictor"):
        assert member in message
    assert "search_space" not in message and "train," not in message


@pytest.mark.parametrize(
    ("attr", "match"),
    [
        ("broken", "no GPU here"),
        ("not_callable", "not a callable"),
        ("goood", "Did you mean 'good'"),
    ],
)
def test_bad_factories_are_learner_errors(plugin, attr, match):
    with pytest.raises(LearnerError, match=match):
        load_learner(f"{plugin}:{attr}")


def test_missing_module_is_a_learner_error_naming_it():
    with pytest.raises(LearnerError, match="no_such_module_xyz"):
        load_learner("no_such_module_xyz:make")


@pytest.mark.parametrize("spec", [":make", "module:", ""])
def test_malformed_specs_are_unknown_names(spec):
    with pytest.raises(UnknownNameError):
        load_learner(spec)
