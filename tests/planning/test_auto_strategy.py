"""`train.strategy: auto`: hf where it fits (always on a CPU), else the cheapest advice that
fits, never over a key the user set; `roll plan`, `--dry-run` and `roll train` agree."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.loader import load_recipe
from rollcli.planning.auto_strategy import explicit_keys, resolve_auto
from rollcli.planning.from_recipe import plan_recipe

runner = CliRunner()


def _cfg(*overrides: str, gpus: int = 8, model: str = "qwen2.5-7b"):  # noqa: ANN202
    flags = {"model": model, "resources.gpus": gpus}
    return load_recipe("rlvr-math", list(overrides), flags)[0]


def _strategy_lines(lines: list[str]) -> list[str]:
    """What auto said of the strategy (its precision lines, and the warm-up a bf16 rollout
    comes with, first: test_auto_precision.py)."""
    precision = ("train.precision", "rollout.precision", "train.warmup_steps")
    return [line for line in lines if not line.startswith(precision)]


def test_a_cpu_run_is_hf_and_its_plan_does_not_change() -> None:
    cfg = _cfg(gpus=0, model="smollm2-135m")
    assert cfg.train.strategy == "auto"
    choice = resolve_auto(cfg)
    assert choice.cfg.train.strategy == "hf"
    assert _strategy_lines(choice.lines) == [
        "train.strategy auto → hf (a CPU run trains with plain torch)"
    ]
    precisions = [  # auto's choices, as set
        f"train.precision={choice.cfg.train.precision}",
        f"rollout.precision={choice.cfg.rollout.precision}",
    ]
    explicit_hf = load_recipe("rlvr-math", ["train.strategy=hf", *precisions])[0]
    assert plan_recipe(choice.cfg).to_json() == plan_recipe(explicit_hf).to_json()


def test_hf_is_kept_where_it_fits() -> None:
    choice = resolve_auto(_cfg(model="qwen2.5-0.5b", gpus=8))
    assert choice.cfg.train.strategy == "hf"
    assert _strategy_lines(choice.lines)[0].startswith("train.strategy auto → hf: it fits (")


def test_7b_on_8_gpus_shards_with_fsdp2_where_hf_does_not_fit() -> None:
    cfg = _cfg()
    assert not plan_recipe(_cfg("train.strategy=hf")).fits
    choice = resolve_auto(cfg)
    chosen = choice.cfg
    assert chosen.train.strategy == "fsdp2"  # preferred to DeepSpeed, which would fit too
    assert plan_recipe(chosen).fits
    deepspeed = [  # ZeRO-3 with the engine's memory share it needs
        "train.strategy=deepspeed",
        "devices.actor_train.zero_stage=3",
        "devices.actor_infer.gpu_memory_utilization=0.55",
    ]
    assert plan_recipe(_cfg(*deepspeed)).fits
    assert _strategy_lines(choice.lines)[0].startswith("train.strategy auto: hf needs ")
    assert any("FSDP2" in line for line in choice.lines)
    assert choice.lines[-1].startswith("  → it fits (")
    # only keys auto may set changed; everything else is the recipe's
    before = cfg.model_dump(mode="json")
    after = chosen.model_dump(mode="json")
    changed = {
        f"{section}.{key}"
        for section in before
        if isinstance(before[section], dict)
        for key in before[section]
        if before[section][key] != after[section][key]
    }
    # (and the precision: auto_precision.py, bf16-mixed on GPUs as the plan assumed before)
    assert changed <= {
        "train.strategy",
        "train.precision",
        "devices.actor_train",
        "devices.actor_infer",
    }


def test_one_gpu_offloads_with_fsdp2() -> None:
    chosen = resolve_auto(_cfg(gpus=1)).cfg
    assert chosen.train.strategy == "fsdp2" and chosen.devices.actor_train.offload_params
    assert plan_recipe(chosen).fits


def test_a_key_the_user_set_is_kept() -> None:
    # the engine's memory share is what auto lowers for 7b on 8 GPUs; set, it stays
    util = "devices.actor_infer.gpu_memory_utilization=0.8"
    chosen = resolve_auto(_cfg(util)).cfg
    assert chosen.devices.actor_infer.gpu_memory_utilization == 0.8
    assert "devices.actor_infer.gpu_memory_utilization" in explicit_keys(_cfg(util))
    assert "devices.actor_infer.gpu_memory_utilization" not in explicit_keys(_cfg())
    assert plan_recipe(chosen).fits  # auto found another way (offload) around it


def test_what_cannot_fit_stays_hf_and_is_refused_with_the_advice() -> None:
    res = runner.invoke(app, ["plan", "rlvr", "--model", "qwen2.5-72b", "--gpus", "1"])
    assert res.exit_code == 1, res.output
    flat = " ".join(res.output.split())
    assert "train.strategy auto → hf: it needs" in flat and "advice:" in flat


@pytest.mark.parametrize("model,gpus", [("qwen3-30b-a3b", 8), ("qwen2.5-72b", 16)])
def test_large_plans_never_apply_tp_lora_or_more_gpus(model: str, gpus: int) -> None:
    chosen = resolve_auto(_cfg(model=model, gpus=gpus)).cfg
    assert chosen.devices.actor_infer.tp == 1 and chosen.train.lora is None
    assert chosen.resources.gpus == gpus


def test_plan_dry_run_and_train_show_the_same_choice() -> None:
    args = ["rlvr", "--model", "qwen2.5-7b", "--gpus", "8"]
    plan = runner.invoke(app, ["plan", *args, "--json"])
    assert plan.exit_code == 0, plan.output  # the mission's example fits by itself
    lines = json.loads(plan.output)["auto"]
    assert lines[0] == "train.precision auto → bf16-mixed (GPUs compute in bf16)"
    assert lines[1].startswith("train.strategy auto: hf needs")
    dry = runner.invoke(app, ["train", *args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    resolved = yaml.safe_load(dry.stdout)
    assert resolved["train"]["strategy"] == "fsdp2"
    flat = " ".join(dry.stderr.split())  # wrapped to the terminal
    for line in lines:  # the same lines, on stderr
        assert " ".join(line.split()) in flat


def _cell(model: str, gpus: int, kind: str) -> str:
    """One cell of docs/planning.md's table of what auto chooses (see its legend)."""
    flags = {"model": model, "resources.gpus": gpus, "devices.gpu_kind": kind}
    cfg = load_recipe("rlvr-math", [], flags)[0]
    chosen = resolve_auto(cfg).cfg
    plan = plan_recipe(chosen)
    worst = plan.peak_device
    peak = f"({worst.memory_bytes['total'] / 2**30:.0f}/{worst.capacity_bytes / 2**30:.0f})"
    if not plan.fits:
        return f"does not fit {peak}"
    train = chosen.devices.actor_train
    strategy = chosen.train.strategy
    bits = [strategy + (f" zero{train.zero_stage}" if strategy == "deepspeed" else "")]
    if strategy == "fsdp2" and train.offload_params:
        bits = ["fsdp2 + CPU offload"]
    bits += ["offload-opt"] if train.offload_optimizer else []
    bits += ["offload-params"] if train.offload_params and strategy != "fsdp2" else []
    bits += ["recompute"] if chosen.train.gradient_checkpointing else []
    util = chosen.devices.actor_infer.gpu_memory_utilization
    bits += [f"engine {util}"] if util != 0.8 else []
    return ", ".join(bits) + f" {peak}"


def test_planning_md_table_is_what_auto_chooses() -> None:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "planning.md").read_text(encoding="utf-8")
    rows = [
        line.strip("|").split(" | ")
        for line in text.splitlines()
        if line.startswith("| qwen") and line.count("|") == 6
    ]
    assert len(rows) >= 16
    for model, kind, *cells in rows:
        for gpus, cell in zip((1, 8, 16), cells, strict=True):
            assert _cell(model.strip(), gpus, kind.strip()) == cell.strip(), (model, kind, gpus)
