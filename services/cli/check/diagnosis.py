"""What ``nevis check`` says when a call breaks: which protocol call is to blame, and the fix.

A failed trial comes back as an error message and a traceback from the learner host; the call
to blame is the innermost protocol method in that traceback (a ``train`` that fails inside its
own ``save_predictor`` call is a save problem, not a training one), or the one the host's own
check names (``save_predictor() must return bytes``).
"""

from __future__ import annotations

import re

LOAD, DECLARATION, TRAIN, PREDICT, ROUND_TRIP, FEATURES, FLOPS = (
    "load",
    "declaration",
    "train",
    "predict shape",
    "save / load round trip",
    "features",
    "FLOPs measured",
)
CALLS = (LOAD, DECLARATION, TRAIN, PREDICT, ROUND_TRIP, FEATURES, FLOPS)
"""The rows of the check's table, in the order the calls are made."""

_ROW_OF_METHOD = {
    "train": TRAIN,
    "prepare_task": TRAIN,
    "predict": PREDICT,
    "save_predictor": ROUND_TRIP,
    "load_predictor": ROUND_TRIP,
    "features": FEATURES,
    "search_space": DECLARATION,
    "resources": DECLARATION,
    "init_state": DECLARATION,
}
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')

FIXES = {
    LOAD: "Make the entry point importable from the folder's root ('module:factory', the module a .py file "
    "there) and have the factory return an object with every method of "
    "workers.learners.protocol.Learner.",
    DECLARATION: "search_space() must return a dict of LogUniform / Uniform / Choice domains, resources() a "
    "Resources(num_workers=1, ...), init_state() something picklable "
    "(all from workers.learners.protocol).",
    TRAIN: "train(view, state, config, ctx) raised: fix the error at the place the traceback names; it must "
    "return TrainOutput(predictor=..., state=...).",
    PREDICT: "predict(predictor, images, ctx) must return finite scores shaped (N, num_classes): one row per "
    "image, one column per class (logits or probabilities), as a numeric array.",
    ROUND_TRIP: "save_predictor(predictor) must return bytes that load_predictor(data, info, ctx) turns back into "
    "the same predictor in a fresh process (e.g. torch.save of the state_dict, then torch.load "
    "into a new model built from info); predictions before and after must agree.",
    FEATURES: "features(predictor, images, ctx) must return a finite numeric array shaped (N, d): one "
    "representation row per image (e.g. the penultimate layer's activations).",
    FLOPS: "Pass every torch module to ctx.track(module) before using it, or count the FLOPs yourself and "
    "call ctx.report_flops(n): a learner that costs nothing cannot be ranked on cFLOP.",
}
LOSS_FIX = (
    "The training loss is not finite: lower the learning rate's upper bound in search_space(), "
    "clip gradients, or guard against log(0) and division by zero; pass the real loss to "
    "ctx.progress(step, predictor, loss=...)."
)
MISSING_FIX = (
    "Add the missing methods (workers.learners.protocol.Learner lists them, the README's linear learner has each)."
)


def blamed_call(error: str, traceback: str) -> str:
    """The row of the table a failed trial belongs to."""
    for method in ("save_predictor", "predict", "features"):
        if f"{method}()" in error:  # the host's own checks of a return value
            return _ROW_OF_METHOD[method]
    methods = [name for _, _, name in _FRAME.findall(traceback) if name in _ROW_OF_METHOD]
    return _ROW_OF_METHOD[methods[-1]] if methods else TRAIN


def where(traceback: str) -> str:
    """The innermost frame of the traceback outside this installation: ``file:line in name``."""
    frames = [
        (f, n, name)
        for f, n, name in _FRAME.findall(traceback)
        if "/workers/" not in f and "/services/" not in f and "site-packages" not in f
    ]
    if not frames:
        return ""
    path, line, name = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line} in {name}"


def fix_for(call: str, error: str = "") -> str:
    if call == LOAD and "lacks" in error:
        return MISSING_FIX
    return FIXES[call]


__all__ = [
    "CALLS",
    "DECLARATION",
    "FEATURES",
    "FIXES",
    "FLOPS",
    "LOAD",
    "LOSS_FIX",
    "MISSING_FIX",
    "PREDICT",
    "ROUND_TRIP",
    "TRAIN",
    "blamed_call",
    "fix_for",
    "where",
]
