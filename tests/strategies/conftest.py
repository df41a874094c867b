"""Fixtures shared by the inference-engine tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

import pytest
import torch

from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer


@pytest.fixture(scope="module")
def hf_engine(tiny_model) -> HFInferEngine:
    """The hf engine on tiny-random (seeded weights are the saved ones; seeded for safety)."""
    torch.manual_seed(0)
    model = load_causal_lm(str(tiny_model), train=False)
    tok = load_tokenizer(str(tiny_model))
    return HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id)


@contextmanager
def _stopped_once_under_way(engine, after_tokens: int = 16):  # noqa: ANN001, ANN202
    """Sets `engine.progress.stop` from another thread once the call inside the block has
    generated `after_tokens` tokens; clears it afterwards."""

    def stopper() -> None:
        while engine.progress.read()[0] < after_tokens:
            threading.Event().wait(0.001)
        engine.progress.stop.set()

    thread = threading.Thread(target=stopper)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        engine.progress.stop.clear()


@pytest.fixture
def stopped_once_under_way() -> Callable:
    return _stopped_once_under_way
