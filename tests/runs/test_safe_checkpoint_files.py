"""Every file a checkpoint holds loads without running code: the RNG states (`rng.pt`) and
async rollouts started ahead (`rollouts_ahead.pt`) are tensors and plain data, read with
`weights_only=True`; a file with anything else (an older roll's, or a planted one) is
refused in one line and its code does not run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from rollcli.data.batch import Batch
from rollcli.rollout.result import RolloutResult
from rollcli.runs.checkpoint import UnsafeCheckpointError, load_tensors_file
from rollcli.runs.rng import capture_rng, restore_rng

RAN = []


def _planted() -> None:
    RAN.append("code from the run folder ran")


class _RunsCode:
    def __reduce__(self):  # noqa: ANN204
        return (_planted, ())


def test_rng_states_round_trip_through_a_safe_file(tmp_path) -> None:
    state = capture_rng()
    expected = (random.random(), float(np.random.random()), float(torch.rand(1)))
    torch.save({"driver": state}, tmp_path / "rng.pt")
    restore_rng(load_tensors_file(tmp_path / "rng.pt")["driver"])
    assert (random.random(), float(np.random.random()), float(torch.rand(1))) == expected


def test_rollouts_ahead_round_trip_through_a_safe_file(tmp_path) -> None:
    batch = Batch(
        {"input_ids": torch.arange(6).view(2, 3)},
        {"answer": ["4", "7"], "meta": [{"a": 1}, {"a": 2}]},
        {"step": 3},
    )
    ahead = {4: RolloutResult(batch, [{"prompt": "1+3", "reward": 1.0}], {"reward/mean": 0.5})}
    torch.save({k: v.to_plain() for k, v in ahead.items()}, tmp_path / "ahead.pt")
    back = {
        k: RolloutResult.from_plain(v) for k, v in load_tensors_file(tmp_path / "ahead.pt").items()
    }
    assert torch.equal(back[4].batch["input_ids"], batch["input_ids"])
    assert back[4].batch.fields == batch.fields and back[4].batch.meta == {"step": 3}
    assert back[4].rows == ahead[4].rows and back[4].metrics == {"reward/mean": 0.5}


@pytest.mark.parametrize(
    "payload",
    [
        {"driver": _RunsCode()},  # a planted object: loading it would call a function
        # the old rollouts_ahead.pt held RolloutResult objects
        {4: RolloutResult(Batch({"x": torch.zeros(2)}), [], {})},
    ],
)
def test_a_file_with_more_than_tensors_is_refused_and_runs_nothing(tmp_path, payload) -> None:
    torch.save(payload, tmp_path / "state.pt")
    with pytest.raises(UnsafeCheckpointError, match=r"state.pt holds objects other than tensors"):
        load_tensors_file(tmp_path / "state.pt")
    assert not RAN


def test_an_rng_state_with_numpys_own_array_restores_too() -> None:
    """Where numpy's arrays are allowed by torch's safe loader (a library may allowlist
    them), an older rng.pt loads; its state restores the same draws."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    expected = float(np.random.random())
    restore_rng(state)
    assert float(np.random.random()) == expected
