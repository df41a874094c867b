"""`roll train rlvr train.num_workers=2` through the real CLI: two data-parallel actor_train
ranks (gloo) train, checkpoint and sync weights; impossible splits are refused up front."""

from __future__ import annotations

import json

import pytest
from roll_subprocess import roll

SMALL = [
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "data.val_size=4",
    "data.train_size=50",
    "train.micro_batch_size=2",
    "run.eval_every=0",
    "algorithm.entropy_coef=0.01",  # random weights score 0: the entropy bonus still moves them
]


def _train(tmp_path, *extra: str):
    return roll(
        "train", "rlvr", "--model", "tiny-random", "--steps", "2", "--save-every", "1",
        "--runs-dir", str(tmp_path), "--run-id", "dp", *SMALL, *extra, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.slow  # two to three minutes on a busy 2-core machine
def test_two_ranks_train_checkpoint_and_resume(tmp_path, tiny_model) -> None:
    res = _train(tmp_path, "train.num_workers=2", "train.mini_batch_size=4")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Setting accelerator to CPU" not in res.stdout + res.stderr
    run = tmp_path / "dp"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "actor/grad_norm" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in steps)
    ckpt = run / "checkpoints" / "step-2"
    assert (ckpt / "model.safetensors").is_file() and (ckpt / "actor_optim.pt").is_file()
    import torch

    rng = torch.load(ckpt / "rng.pt", weights_only=False)
    assert len(rng["actor_train"]) == 2  # both ranks' generators are in the checkpoint
    res = roll("resume", "dp", "--runs-dir", str(tmp_path), "train.steps=3", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (run / "checkpoints" / "step-3" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.num_workers=3"], "rollout.batch_size = 8 does not split evenly"),
        (
            ["rollout.batch_size=12", "train.mini_batch_size=6", "train.num_workers=4"],
            "train.mini_batch_size = 6 does not split evenly",
        ),
        (["train.num_workers=2", "train.strategy=megatron"], "megatron cannot train"),
    ],
)
def test_impossible_data_parallel_runs_are_refused(overrides, message) -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe

    with pytest.raises(ConfigError, match=message):  # when the recipe loads: dry-run, plan, train
        load_recipe("rlvr", [*SMALL, *overrides], {})


def test_data_parallel_is_refused_outside_rlvr() -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe

    with pytest.raises(ConfigError, match="rlvr and agentic pipelines only"):
        load_recipe("sft", ["train.num_workers=2"], {})
