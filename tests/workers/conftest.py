"""Fixtures of the worker tests."""

from __future__ import annotations

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook


@pytest.fixture
def captured_grads():
    """The gradients each optimizer step is about to apply (torch's global step hook)."""
    steps: list[list[torch.Tensor]] = []

    def hook(optimizer, args, kwargs) -> None:  # noqa: ANN001
        steps.append([p.grad.clone() for g in optimizer.param_groups for p in g["params"]])

    handle = register_optimizer_step_pre_hook(hook)
    yield steps
    handle.remove()
