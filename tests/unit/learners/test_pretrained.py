"""PT honestly named: provenance in the checkpoint, ``pt`` / ``pt_ft`` refuse a checkpoint that
declares no outside origin, ``pt_self`` / ``pt_ft_self`` take ``nevis pretrain``'s, and
``nevis pretrain import`` converts a torchvision ResNet-34 state dict (built here by hand with
torchvision's key layout and shapes: no download, no torchvision needed)."""

from __future__ import annotations

import io

import pytest
import torch
from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import LearnerError
from workers.learners.indep import IndepLearner
from workers.learners.loading import load_learner
from workers.learners.models import LowResResNet34
from workers.learners.pretrained import PtFtLearner, PtFtSelfLearner, PtLearner, PtSelfLearner, check_provenance
from workers.learners.pretrained_import import (
    NEVIS_PREDICTOR,
    TORCHVISION_RESNET34,
    block_names,
    convert_torchvision_resnet34,
    import_checkpoint,
    resample_stem,
)
from workers.learners.provenance import EXTERNAL, SELF, Provenance, pretraining_cflop, read_provenance, stamp
from workers.learners.trial_options import TrialOptions
from workers.stream.task_view import CausalTaskView

from .conftest import RecordingContext

WIDTH = 8
CONFIG = {"learning_rate": 0.05, "label_smoothing": 0.0}
BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def torchvision_resnet34_state(num_classes: int = 1000) -> dict[str, torch.Tensor]:
    """A state dict with the keys and shapes of ``torchvision.models.resnet34()``, random values."""
    g = torch.Generator().manual_seed(0)
    state: dict[str, torch.Tensor] = {}

    def bn(prefix: str, c: int) -> None:
        state.update(
            {
                f"{prefix}.weight": torch.rand(c, generator=g) + 0.5,
                f"{prefix}.bias": torch.randn(c, generator=g),
                f"{prefix}.running_mean": torch.randn(c, generator=g),
                f"{prefix}.running_var": torch.rand(c, generator=g) + 0.5,
                f"{prefix}.num_batches_tracked": torch.tensor(7),
            }
        )

    state["conv1.weight"] = torch.randn(64, 3, 7, 7, generator=g) * 0.05
    bn("bn1", 64)
    c_in = 64
    for stage, (depth, c) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True), start=1):
        for i in range(depth):
            p = f"layer{stage}.{i}"
            state[f"{p}.conv1.weight"] = torch.randn(c, c_in, 3, 3, generator=g) * 0.02
            bn(f"{p}.bn1", c)
            state[f"{p}.conv2.weight"] = torch.randn(c, c, 3, 3, generator=g) * 0.02
            bn(f"{p}.bn2", c)
            if i == 0 and stage > 1:
                state[f"{p}.downsample.0.weight"] = torch.randn(c, c_in, 1, 1, generator=g) * 0.02
                bn(f"{p}.downsample.1", c)
            c_in = c
    state["fc.weight"] = torch.randn(num_classes, 512, generator=g) * 0.01
    state["fc.bias"] = torch.zeros(num_classes)
    return state


def saved(state: dict[str, torch.Tensor]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tv_state() -> dict[str, torch.Tensor]:
    return torchvision_resnet34_state()


@pytest.fixture(scope="module")
def small_bytes(digits) -> bytes:
    """An untrained small-CNN predictor file, as ``save_predictor`` writes it (no provenance)."""
    learner = IndepLearner("small_cnn", width=WIDTH)
    return learner.save_predictor(learner._new_predictor(digits.info, RecordingContext()))


def first_task(digits, checkpoint: bytes) -> CausalTaskView:
    return CausalTaskView(
        digits.info, digits.train, digits.test, {}, lambda o: digits.train, 1, load_pretrained=lambda: checkpoint
    )


def self_made(checkpoint: bytes) -> bytes:
    return stamp(
        checkpoint,
        Provenance(
            SELF,
            "nevis pretrain: ft_prev_small over 3 meta-train tasks of 'tiny'",
            "nevis pretrain",
            submission_id=4,
            cflop=1.5e9,
        ),
    )


def test_the_registry_names_self_pretraining_apart():
    for name, kind in (
        ("pt", PtLearner),
        ("pt_ft", PtFtLearner),
        ("pt_self", PtSelfLearner),
        ("pt_ft_self", PtFtSelfLearner),
    ):
        assert type(load_learner(name)) is kind and load_learner(name).model_name == "resnet34"
        assert type(load_learner(f"{name}_small")) is kind and load_learner(f"{name}_small").model_name == "small_cnn"
    assert (PtLearner.origin, PtSelfLearner.origin) == (EXTERNAL, SELF)


def test_a_record_survives_the_round_trip_and_the_predictor_still_loads(digits, small_bytes):
    assert read_provenance(small_bytes) is None
    stamped = self_made(small_bytes)
    record = read_provenance(stamped)
    assert record is not None and (record.origin, record.submission_id, record.cflop) == (SELF, 4, 1.5e9)
    learner = IndepLearner("small_cnn", width=WIDTH)
    loaded = learner.load_predictor(stamped, digits.info, RecordingContext())
    assert loaded.model_config.name == "small_cnn"
    with pytest.raises(LearnerError, match="not a predictor file"):
        stamp(saved({"weights": torch.zeros(1)}), record)
    with pytest.raises(ValueError, match="declaration"):
        Provenance(EXTERNAL, "  ", TORCHVISION_RESNET34)


@pytest.mark.parametrize("learner", [PtLearner, PtFtLearner])
@pytest.mark.parametrize("made", ["plain", "self"])
def test_pt_refuses_a_checkpoint_without_declared_outside_provenance(digits, small_bytes, learner, made):
    """The paper's PT starts from outside data: a plain or self-pretrained checkpoint stops the
    trial before anything is trained or ranked, naming pt_self and `nevis pretrain import`."""
    checkpoint = small_bytes if made == "plain" else self_made(small_bytes)
    ctx = RecordingContext(seed=1, steps=1)
    with pytest.raises(LearnerError) as info:
        learner("small_cnn", width=WIDTH).train(first_task(digits, checkpoint), None, CONFIG, ctx)
    message = str(info.value)
    assert "declares no such provenance" in message and "pt_self" in message, message
    assert "nevis pretrain import" in message
    assert ("progress", 1) not in ctx.events
    assert ("it records: nevis pretrain" in message) == (made == "self")


def test_pt_takes_a_declared_checkpoint_and_pt_self_refuses_it(digits, small_bytes):
    declared = import_checkpoint(small_bytes, source=NEVIS_PREDICTOR, declared="small CNN trained on ImageNet64 here")
    record = read_provenance(declared)
    assert record is not None and record.origin == EXTERNAL and len(record.source_sha256) == 64
    ctx = RecordingContext(seed=1, steps=1)
    learner = PtLearner("small_cnn", width=WIDTH)
    start = learner._initial_predictor(first_task(digits, declared), TrialOptions("small_cnn"), ctx).model.state_dict()
    weights = learner.load_predictor(declared, digits.info, ctx).model.state_dict()
    assert all(torch.equal(w, start[k]) for k, w in weights.items() if not k.startswith("head."))
    with pytest.raises(LearnerError, match="declares outside provenance.*Run it as pt or pt_ft"):
        check_provenance(declared, "pt_self", SELF)
    assert check_provenance(small_bytes, "pt_self", SELF) is None  # a plain predictor file is self-made
    with pytest.raises(LearnerError, match="self-pretrained.*cannot be declared external"):
        import_checkpoint(self_made(small_bytes), source=NEVIS_PREDICTOR, declared="it is ImageNet, honest")


def test_pt_ft_ranks_a_declared_checkpoint_after_the_earlier_tasks(digits, small_bytes):
    declared = import_checkpoint(small_bytes, source=NEVIS_PREDICTOR, declared="outside weights")
    out = PtFtLearner("small_cnn", width=WIDTH).train(
        first_task(digits, declared), None, CONFIG, RecordingContext(seed=1, steps=1)
    )
    record = out.state[0]
    assert record["chosen"] == -2 and set(record["knn_error"]) == {-2} and "fresh_would_win" in record


def test_torchvision_resnet34_maps_onto_the_low_resolution_one(tv_state, digits):
    config, weights, mapping = convert_torchvision_resnet34(tv_state)
    assert (config.name, config.num_classes) == ("resnet34", 1000)
    model = LowResResNet34(1000)
    model.load_state_dict(weights, strict=True)  # every key present, every shape right
    pairs = dict(block_names())
    assert len(pairs) == 16 and pairs["layer3.5"] == "stages.12" and pairs["layer4.2"] == "stages.15"
    assert torch.equal(weights["stages.12.conv2.weight"], tv_state["layer3.5.conv2.weight"])
    assert torch.equal(weights["stages.3.shortcut.0.weight"], tv_state["layer2.0.downsample.0.weight"])
    assert torch.equal(weights["stages.13.shortcut.1.running_var"], tv_state["layer4.0.downsample.1.running_var"])
    assert torch.equal(weights["head.weight"], tv_state["fc.weight"])
    assert torch.equal(weights["stem.1.running_mean"], tv_state["bn1.running_mean"])
    stem = weights["stem.0.weight"]
    assert stem.shape == (64, 3, 3, 3)
    torch.testing.assert_close(stem.sum(dim=(2, 3)), tv_state["conv1.weight"].sum(dim=(2, 3)))  # uniform response
    centre = torch.zeros(1, 1, 7, 7)
    centre[..., 3, 3] = 1.0
    assert resample_stem(centre)[0, 0, 1, 1] > resample_stem(centre).sum() - 1e-6  # the centre tap stays central
    assert "stem 7x7 kernels resampled to 3x3 by area" in mapping

    _, fresh, how = convert_torchvision_resnet34(tv_state, stem="fresh")
    assert not torch.equal(fresh["stem.1.running_mean"], tv_state["bn1.running_mean"])
    assert torch.equal(fresh["stages.0.conv1.weight"], tv_state["layer1.0.conv1.weight"])
    assert "left at initialisation" in how


def test_a_state_dict_of_another_network_is_refused_naming_keys(tv_state):
    bottleneck = {**tv_state, "layer1.0.conv3.weight": torch.zeros(256, 64, 1, 1)}
    with pytest.raises(LearnerError, match=r"unexpected \['layer1.0.conv3.weight'\]"):
        convert_torchvision_resnet34(bottleneck)
    narrow = {**tv_state, "layer1.0.conv1.weight": torch.zeros(32, 64, 3, 3)}
    with pytest.raises(LearnerError, match="do not fit.*layer1.0.conv1.weight"):
        convert_torchvision_resnet34(narrow)
    with pytest.raises(LearnerError, match="missing"):
        convert_torchvision_resnet34({k: v for k, v in tv_state.items() if k != "layer4.2.bn2.bias"})


def test_nevis_pretrain_import_writes_a_checkpoint_pt_accepts(tv_state, tmp_path, digits):
    source = tmp_path / "resnet34.pth"
    source.write_bytes(saved({"module." + k: v for k, v in tv_state.items()}))  # DataParallel's prefix too
    out = tmp_path / "pt.bin"
    result = CliRunner().invoke(
        app,
        [
            "pretrain",
            "import",
            str(source),
            "--from",
            TORCHVISION_RESNET34,
            "--out",
            str(out),
            "--provenance",
            "torchvision IMAGENET1K_V1, 224 px",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "pt --pretrained" in result.output
    checkpoint = out.read_bytes()
    record = read_provenance(checkpoint)
    assert record is not None and record.origin == EXTERNAL and record.source == TORCHVISION_RESNET34
    assert record.declared == "torchvision IMAGENET1K_V1, 224 px" and "16 basic blocks" in record.mapping
    assert check_provenance(checkpoint, "pt", EXTERNAL) == record
    loaded = IndepLearner().load_predictor(checkpoint, digits.info, RecordingContext())
    assert isinstance(loaded.model, LowResResNet34) and loaded.augment.size == 64
    again = CliRunner().invoke(
        app, ["pretrain", "import", str(source), "--from", TORCHVISION_RESNET34, "--out", str(out), "--provenance", "x"]
    )
    assert again.exit_code != 0 and "already exists" in str(again.exception or again.output)


def test_the_pretraining_cflop_is_read_from_a_self_pretrained_checkpoint_only(small_bytes):
    """What `nevis run --pretrained` records beside the PT run's own cFLOP (shown, not charged)."""
    plain = small_bytes
    assert pretraining_cflop(self_made(plain)) == 1.5e9
    imported = stamp(plain, Provenance(EXTERNAL, "ImageNet, 64 px, the reference's recipe", TORCHVISION_RESNET34))
    assert pretraining_cflop(imported) is None
    assert pretraining_cflop(plain) is None  # no record
    assert pretraining_cflop(b"not a torch file") is None  # a custom learner's checkpoint
