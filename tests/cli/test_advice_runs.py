"""Advice that runs: every change `roll plan` advises is a command line `roll train` accepts.

`roll plan` advised `--gpus 16 --nodes 2`, and `roll train` answered `No such option:
--nodes`. Here each kind of step on the planner's advice ladder (planning/advice_steps.py)
comes from a setup that needs it, through `roll plan --json`, and the advice is fed to
`roll train --dry-run` as a user would type it: each step on top of the ones before it is
accepted (a plan still too big is refused only as not fitting), and with every step the dry
run passes."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()

# what each kind of step on the ladder says, by the start of its line
KINDS = {
    "zero": "shard model states over",
    "lora": "train LoRA adapters",
    "fsdp2 offload": "offload weights, gradients and Adam states to host memory:",
    "offload optimizer": "offload Adam states",
    "offload params": "offload parameters too",
    "recompute": "recompute activations",
    "micro-batch": "smaller micro-batch",
    "tp": "split the inference engine",
    "offload when idle": "offload this role while",
    "memory share": "leave room for colocated roles",
    "more gpus": "use ",
}
# (recipe, model, GPUs, overrides): setups that do not fit, each needing some of the kinds.
# Two steps of the ladder come in no setup (a search over recipes, models from 0.5B to 72B,
# 1-16 GPUs, four GPU kinds, every strategy and engine found none): `fewer sequences at
# once` never lowers a peak (vLLM reserves its cache by gpu_memory_utilization, whatever
# max_num_seqs), and plain hf's `offload ... with FSDP2` only follows a LoRA step that
# failed, and LoRA always lowers hf's peak.
SETUPS = [
    ("rlvr-math", "qwen2.5-1.5b", 1, ["train.strategy=hf", "devices.gpu_kind=4090"]),
    ("rlvr-math", "qwen2.5-1.5b", 2, ["train.strategy=hf", "devices.gpu_kind=4090"]),
    ("rlvr-math", "qwen2.5-1.5b", 1, ["train.strategy=fsdp2", "devices.gpu_kind=4090"]),
    ("rlvr-math", "qwen2.5-7b", 1, ["train.strategy=deepspeed", "devices.gpu_kind=4090"]),
    ("rlvr-math", "qwen2.5-7b", 1, ["train.strategy=hf", "devices.gpu_kind=4090"]),
    ("rlvr-math", "qwen2.5-72b", 2, ["train.strategy=hf", "rollout.engine=vllm"]),
    (
        "rlvr-math",
        "qwen2.5-7b",
        1,
        ["train.strategy=deepspeed", "rollout.engine=vllm", "devices.gpu_kind=a100-40g"],
    ),
    (
        "rlvr-math",
        "qwen2.5-7b",
        1,
        [
            "train.strategy=deepspeed",
            "rollout.engine=vllm",
            "devices.actor_infer.offload_when_idle=false",
        ],
    ),
    (  # more GPUs than a node holds: `--gpus 16 --nodes 2`
        "agentic-sokoban",
        "qwen2.5-14b",
        8,
        [
            "train.strategy=deepspeed",
            "rollout.engine=vllm",
            "devices.gpu_kind=4090",
            "devices.actor_train.device_mapping='0'",
            "devices.actor_infer.device_mapping='0'",
        ],
    ),
]


def _setup_args(recipe: str, model: str, gpus: int, overrides: list[str]) -> list[str]:
    return [recipe, *overrides, "--model", model, "--gpus", str(gpus)]


def _advice(args: list[str]) -> list[str]:
    res = runner.invoke(app, ["plan", *args, "--json"])
    assert res.exit_code == 1, res.output  # it does not fit: the advice says what to change
    return [line for line in json.loads(res.stdout)["advice"] if "→" in line]


def _typed(line: str) -> list[str]:
    """The arguments an advice line tells a user to type: its `...` parts, as a shell
    splits them (`devices.actor_train.device_mapping='0-1'` loses its quotes)."""
    return [arg for part in re.findall(r"`([^`]+)`", line) for arg in shlex.split(part)]


@pytest.fixture(scope="module")
def advice() -> dict[int, list[str]]:
    return {i: _advice(_setup_args(*setup)) for i, setup in enumerate(SETUPS)}


def test_the_setups_get_every_kind_of_advice(advice: dict[int, list[str]]) -> None:
    given = [line for lines in advice.values() for line in lines]
    missing = [kind for kind, start in KINDS.items() if not any(x.startswith(start) for x in given)]
    assert not missing
    assert any("`--nodes 2`" in line for line in given)  # the advice `roll train` refused
    assert sum(lines[-1].endswith("→ fits") for lines in advice.values()) >= 5


@pytest.mark.parametrize("index", range(len(SETUPS)))
def test_roll_train_takes_each_advice(index: int, advice: dict[int, list[str]]) -> None:
    setup = _setup_args(*SETUPS[index])
    typed: list[str] = []
    lines = advice[index]
    for n, line in enumerate(lines, 1):
        typed += _typed(line)
        res = runner.invoke(app, ["train", *setup, *typed, "--dry-run"])
        flat = " ".join(res.stderr.split())
        if n == len(lines) and line.endswith("→ fits"):
            assert res.exit_code == 0, (line, flat)
        else:  # accepted; the plan may still be too big for this step alone
            assert res.exit_code == 0 or "does not fit" in flat, (line, flat)


def test_nodes_means_the_same_to_train_as_to_plan() -> None:
    """`--nodes` is `devices.nodes` in both commands: the GPUs' layout the plan is made
    for (8 a node here), and the same refusal without GPUs."""
    args = ["rlvr-math", "--model", "qwen2.5-7b", "--gpus", "16", "--nodes", "2"]
    plan = runner.invoke(app, ["plan", *args, "--json"])
    assert plan.exit_code == 0, plan.output
    dry = runner.invoke(app, ["train", *args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert yaml.safe_load(dry.stdout)["devices"]["nodes"] == 2
    cpu = ["rlvr-math", "--nodes", "2"]
    refusals = [runner.invoke(app, [command, *cpu]) for command in ("plan", "train")]
    lines = [" ".join(r.stderr.split()) for r in refusals]
    assert all(r.exit_code == 2 for r in refusals) and lines[0] == lines[1]
    assert "devices.nodes = 2 (--nodes) spreads GPUs over nodes" in lines[0]
