"""Benchmark: the element-wise work cFLOP does not count, against what it does (docs/fidelity.md F2).

cFLOP counts matmuls and convolutions (torch's FLOP counter, as the learner host's meter does);
XLA's cost analysis, which the reference uses, also counts element-wise arithmetic. This measures
one training step of each built-in CNN at its default width and image size: the counted FLOPs
(forward + backward, torch.utils.flop_counter), and the uncounted element-wise FLOPs from the
shapes hooks see, at generous per-element costs (batch norm in training mode 8 forward + 16
backward, ReLU 1 + 1, residual add 1 + 1, max pooling k² − 1 + 1, average pooling 1 + 1 per input
element) plus the optimiser (SGD with momentum and weight decay: 5 per parameter per step).

Run: .venv/bin/python bench/bench_elementwise.py [--batch 128]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from workers.learners.models import MODELS, ModelConfig, build_model

BN = (8, 16)  # batch norm, training mode: mean, variance, normalise, scale and shift; backward about twice
RELU = (1, 1)
ADD = (1, 1)
AVG = (1, 1)
OPTIMISER = 5  # SGD, momentum and weight decay: per parameter per step


def measure(name: str, batch: int) -> tuple[float, float, float]:
    """(counted FLOPs, uncounted element-wise FLOPs, optimiser FLOPs) of one training step."""
    _, size = MODELS[name][0], MODELS[name][1]
    torch.manual_seed(0)
    model = build_model(ModelConfig(name, 100, None)).train()
    images, labels = torch.randn(batch, 3, size, size), torch.randint(0, 100, (batch,))
    uncounted = [0.0]

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        n = float(inputs[0].numel())
        if isinstance(module, nn.BatchNorm2d):
            uncounted[0] += n * sum(BN)
        elif isinstance(module, nn.ReLU):
            uncounted[0] += n * sum(RELU)
        elif isinstance(module, nn.MaxPool2d):
            k = module.kernel_size if isinstance(module.kernel_size, int) else module.kernel_size[0]
            uncounted[0] += float(output.numel()) * (k * k - 1) + n
        elif isinstance(module, nn.AdaptiveAvgPool2d):
            uncounted[0] += n * sum(AVG)
        elif type(module).__name__ == "BasicBlock":  # the residual add: out + shortcut(x)
            uncounted[0] += float(output.numel()) * sum(ADD)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    counter = FlopCounterMode(display=False)
    with counter:
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
    for handle in handles:
        handle.remove()
    params = sum(p.numel() for p in model.parameters())
    return float(counter.get_total_flops()), uncounted[0], float(OPTIMISER * params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    for name in MODELS:
        counted, elementwise, optimiser = measure(name, args.batch)
        share = (elementwise + optimiser) / counted
        print(
            f"{name:>9} @ {MODELS[name][1]} px, batch {args.batch}: counted {counted:.3e}, element-wise "
            f"{elementwise:.3e}, optimiser {optimiser:.3e}: uncounted = {100 * share:.2f} % of counted"
        )


if __name__ == "__main__":
    main()
