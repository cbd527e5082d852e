"""Finding a learner by name: a built-in (``indep``) or a ``module:factory`` spec.

A spec with a colon names an importable module and a callable in it; the callable is
called (with the given options, none by default) and must return an object with every
member of :class:`~workers.learners.protocol.Learner`. Anything else is a built-in name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from services.core.errors import LearnerError, UnknownNameError, unknown_name_message
from services.core.registry import Registry
from workers.learners.bhpo import BhpoLearner
from workers.learners.finetune import FtDLearner, FtPrevLearner, MtLearner
from workers.learners.indep import IndepLearner
from workers.learners.pretrained import PtFtLearner, PtFtSelfLearner, PtLearner, PtSelfLearner
from workers.learners.protocol import Learner

LearnerFactory = Callable[..., Any]


def _small(learner: type[IndepLearner]) -> LearnerFactory:
    """``learner`` on the small CNN: a fast learner for smoke runs and tests, not a paper baseline."""
    return lambda **options: learner("small_cnn", **options)


LEARNERS: Registry[LearnerFactory] = Registry("learner")
for _name, _factory in {
    "indep": IndepLearner,
    "indep_small": _small(IndepLearner),
    "indep_resnet34": lambda **options: IndepLearner("resnet34", **options),
    "ft_prev": FtPrevLearner,
    "ft_prev_small": _small(FtPrevLearner),
    "ft_d": FtDLearner,
    "ft_d_small": _small(FtDLearner),
    "mt": MtLearner,
    "mt_small": _small(MtLearner),
    "bhpo": BhpoLearner,
    "pt": PtLearner,
    "pt_small": _small(PtLearner),
    "pt_ft": PtFtLearner,
    "pt_ft_small": _small(PtFtLearner),
    "pt_self": PtSelfLearner,
    "pt_self_small": _small(PtSelfLearner),
    "pt_ft_self": PtFtSelfLearner,
    "pt_ft_self_small": _small(PtFtSelfLearner),
}.items():
    LEARNERS.register(_name, _factory)
"""Built-in learner name → factory (keyword options are passed through).

The paper's baselines (``indep``, ``ft_prev``, ``ft_d``, ``mt``, ``pt``, ``pt_ft``, ``bhpo``)
train the low-resolution ResNet-34, on a GPU wherever the cluster has one; ``pt`` and ``pt_ft``
take only a checkpoint of declared outside provenance (``nevis pretrain import``).
``pt_self`` and ``pt_ft_self`` are the same PT learners on a checkpoint self-pretrained by
``nevis pretrain`` on the stream's own meta-train tasks: not the paper's PT. Each ``NAME_small``
is the same learner on the ~240k-parameter CNN: fast on CPUs, for smoke runs and tests, not a
paper baseline. ``indep_resnet34`` is an old alias of ``indep``, kept because stored
submissions name it.
"""

REQUIRED_METHODS = (
    "search_space",
    "resources",
    "init_state",
    "train",
    "predict",
    "features",
    "save_predictor",
    "load_predictor",
)


def builtin_names() -> list[str]:
    """Names of the built-in learners, sorted."""
    return list(LEARNERS.names())


def load_learner(spec: str, options: Mapping[str, Any] | None = None) -> Learner:
    """The learner named by ``spec``.

    Args:
        spec: a built-in name (see :data:`LEARNERS`) or "package.module:factory".
        options: keyword arguments for the factory; none by default.

    Raises:
        UnknownNameError: ``spec`` is neither a built-in nor a ``module:factory`` spec.
        LearnerError: the module cannot be imported, the factory is missing or fails, or
            what it returns lacks members of the Learner protocol (all are named).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownNameError(unknown_name_message("learner", str(spec), LEARNERS.names()))
    spec = spec.strip()
    kwargs = dict(options or {})
    if ":" in spec:
        factory = _import_factory(spec)
    elif spec in LEARNERS:
        factory = LEARNERS.get(spec)
    else:
        raise UnknownNameError(
            unknown_name_message("learner", spec, LEARNERS.names())
            + " A learner of your own is given as 'package.module:factory'."
        )
    try:
        learner = factory(**kwargs)
    except Exception as exc:
        raise LearnerError(f"The learner factory of {spec!r} failed: {exc!r}.") from exc
    check_learner(learner, spec)
    return learner


def check_learner(learner: Any, spec: str) -> None:
    """Raise :class:`LearnerError` naming every Learner member ``learner`` lacks."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(learner, m, None))]
    name = getattr(learner, "name", None)
    if not isinstance(name, str) or not name:
        missing.insert(0, "name (a non-empty str)")
    if missing:
        raise LearnerError(
            f"The object made by {spec!r} ({type(learner).__name__}) is not a learner: it "
            f"lacks {', '.join(missing)}. See workers/learners/protocol.py for the protocol."
        )


def _import_factory(spec: str) -> LearnerFactory:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UnknownNameError(f"Learner spec {spec!r} is malformed: expected 'package.module:factory'.")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or whatever its import-time code raised
        raise LearnerError(
            f"Cannot import module {module_name!r} of learner spec {spec!r}: {exc}. Is it installed, or on PYTHONPATH?"
        ) from exc
    factory: Any = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            known = [n for n in dir(module) if not n.startswith("_")]
            raise LearnerError(unknown_name_message(f"attribute of module {module_name!r}:", attr, known))
        factory = getattr(factory, part)
    if not callable(factory):
        raise LearnerError(f"{spec!r} names a {type(factory).__name__}, not a callable that makes a learner.")
    return factory


__all__ = ["LEARNERS", "REQUIRED_METHODS", "LearnerFactory", "builtin_names", "check_learner", "load_learner"]
