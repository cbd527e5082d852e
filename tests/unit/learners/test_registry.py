"""Finding learners: built-in names and 'module:factory' specs, with clear errors."""

from __future__ import annotations

import textwrap

import pytest

from services.cli.pretrain_cmd import pt_learner_for
from services.core.errors import LearnerError, UnknownNameError
from workers.learners.finetune import FtDLearner, FtPrevLearner, MtLearner
from workers.learners.indep import IndepLearner
from workers.learners.loading import builtin_names, load_learner
from workers.learners.models import LowResResNet34, SmallCNN
from workers.learners.pretrained import PtFtLearner, PtFtSelfLearner, PtLearner, PtSelfLearner

from .conftest import RecordingContext, task_info

TRANSFER_BASELINES = {
    "ft_prev": FtPrevLearner,
    "ft_d": FtDLearner,
    "mt": MtLearner,
    "pt": PtLearner,
    "pt_ft": PtFtLearner,
    "pt_self": PtSelfLearner,
    "pt_ft_self": PtFtSelfLearner,
}

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
    assert load_learner("indep").model_name == "resnet34" and load_learner("indep_small").model_name == "small_cnn"
    assert {f"{name}_small" for name in ("indep", *TRANSFER_BASELINES)} <= set(builtin_names())
    assert load_learner("indep", {"width": 8}).width == 8


@pytest.mark.parametrize("name", sorted(TRANSFER_BASELINES))
def test_the_transfer_baselines_are_the_paper_s_resnet34_and_their_small_names_the_small_cnn(name):
    """``ft_prev`` ... ``pt_ft`` are the paper's baselines (the ResNet-34, on a GPU where there is
    one), ``pt_self`` / ``pt_ft_self`` the self-pretrained PT on it; ``NAME_small`` is the same
    learner on the small CNN, for smoke runs and tests. Built and inspected only: no step is
    trained."""
    info = task_info(num_classes=3)
    for spec, model, network, gpus in (
        (name, "resnet34", LowResResNet34, 1.0),
        (f"{name}_small", "small_cnn", SmallCNN, 0.0),
    ):
        learner = load_learner(spec)
        assert type(learner) is TRANSFER_BASELINES[name], spec
        assert learner.model_name == model, spec
        assert isinstance(learner._new_predictor(info, RecordingContext()).model, network), spec
        resources = learner.resources()
        assert (resources.gpus_per_worker, resources.gpu_optional) == (gpus, True), spec
        assert learner.resources() == IndepLearner(model).resources()  # asked for as indep's are
    # `nevis pretrain` self-pretrains: its checkpoints are for the self-pretrained PT of the same network.
    assert pt_learner_for(f"{name}_small") == "pt_self_small" and pt_learner_for(name) == "pt_self"


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
    for member in ("resources", "init_state", "predict", "features", "save_predictor", "load_predictor"):
        assert member in message
    assert "search_space" not in message and "train," not in message


@pytest.mark.parametrize(
    ("attr", "match"), [("broken", "no GPU here"), ("not_callable", "not a callable"), ("goood", "Did you mean 'good'")]
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
