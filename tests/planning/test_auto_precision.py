"""`train.precision: auto` (planning/auto_precision.py): bf16-mixed on GPUs and on a CPU whose
bf16 matmul beats fp32 at the model's shapes, fp32 elsewhere; a value the recipe set is
kept; the plan and the workers then get it (param bytes, the trainer's precision, the
reference's dtype). The CPU's speed is the probe's (planning/cpu_bf16.py), measured once
and cached: here it is measured for real once, then set where a case needs a given CPU."""

from __future__ import annotations

import json

import pytest

from rollcli.config.loader import load_recipe
from rollcli.planning import auto_precision, cpu_bf16
from rollcli.planning.auto_strategy import resolve_auto
from rollcli.planning.from_recipe import recipe_plan_input
from rollcli.planning.run_plan import plan_run
from rollcli.runtime.role_args import role_args


def _cfg(*overrides: str):
    cfg, _ = load_recipe("rlvr-math", list(overrides))
    return cfg


def _cpu_speedup(monkeypatch, speedup: float) -> None:
    monkeypatch.setattr(cpu_bf16, "bf16_probe", lambda *shape: {"speedup": speedup})


def test_the_probe_is_measured_once_per_machine_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROLL_CACHE", str(tmp_path))
    first = cpu_bf16.bf16_probe(128, 256, 49152)
    assert first["cached"] is False and first["speedup"] > 0
    assert first["fp32_s"] / first["bf16_s"] == pytest.approx(first["speedup"])
    (entry,) = (tmp_path / "bf16").glob("*.json")
    assert json.loads(entry.read_text())["key"]["shapes"] == [[128, 256], [256, 128], [128, 2048]]
    again = cpu_bf16.bf16_probe(128, 256, 49152)
    assert again == {**first, "cached": True}  # read back, not measured again
    assert cpu_bf16.bf16_probe(64, 256, 49152)["cached"] is False  # other shapes: measured


@pytest.mark.parametrize(
    ("speedup", "chosen"), [(2.3, "bf16-mixed"), (1.31, "bf16-mixed"), (1.2, "fp32"), (0.3, "fp32")]
)
def test_auto_on_a_cpu_follows_the_probe(monkeypatch, speedup, chosen) -> None:
    monkeypatch.setattr(auto_precision, "CPU_AUTO_BF16", True)
    _cpu_speedup(monkeypatch, speedup)
    choice = resolve_auto(_cfg())
    assert choice.cfg.train.precision == chosen
    (line,) = [x for x in choice.lines if x.startswith("train.precision")]
    assert f"auto → {chosen}" in line and f"{speedup:.1f}x" in line
    request = recipe_plan_input(choice.cfg)
    args = role_args(choice.cfg, request, plan_run(choice.cfg).plan)
    assert args.precision == chosen
    assert args.reference_dtype == ("bfloat16" if chosen == "bf16-mixed" else "float32")
    assert args.infer.dtype == "float32"  # the engine keeps rollout.precision's


def test_with_the_cpu_switch_off_a_cpu_keeps_fp32_and_says_how(monkeypatch) -> None:
    """`CPU_AUTO_BF16 = False` (as before the learning check): fp32 and the key to use."""
    assert auto_precision.CPU_AUTO_BF16  # the shipped default since the 9 seeds held
    monkeypatch.setattr(auto_precision, "CPU_AUTO_BF16", False)
    _cpu_speedup(monkeypatch, 4.5)
    choice = resolve_auto(_cfg())
    assert choice.cfg.train.precision == "fp32"
    (line,) = [x for x in choice.lines if x.startswith("train.precision")]
    assert "4.5x" in line and "train.precision: bf16-mixed uses it" in line


def test_a_value_the_recipe_set_is_kept_and_gpus_take_bf16(monkeypatch) -> None:
    _cpu_speedup(monkeypatch, 3.0)
    explicit = resolve_auto(_cfg("train.precision=fp32"))
    assert explicit.cfg.train.precision == "fp32"
    assert not [x for x in explicit.lines if x.startswith("train.precision")]
    _cpu_speedup(monkeypatch, 0.5)
    forced = resolve_auto(_cfg("train.precision=bf16-mixed"))
    assert forced.cfg.train.precision == "bf16-mixed"
    gpus = auto_precision.auto_precision(_cfg("resources.gpus=8", "model=qwen2.5-0.5b"))
    assert gpus == ("bf16-mixed", "GPUs compute in bf16")


def test_a_cpu_run_of_another_strategy_stays_fp32(monkeypatch) -> None:
    _cpu_speedup(monkeypatch, 3.0)
    chosen, why = auto_precision.auto_precision(_cfg("train.strategy=deepspeed"))
    assert chosen == "fp32" and "hf strategy's" in why


def test_the_run_records_the_choice(monkeypatch) -> None:
    """The recipe a run writes holds the resolved precision, so a resume on another
    machine kind trains as the run began."""
    from rollcli.config.loader import dump_recipe

    monkeypatch.setattr(auto_precision, "CPU_AUTO_BF16", True)
    _cpu_speedup(monkeypatch, 2.0)
    cfg = resolve_auto(_cfg()).cfg
    assert "precision: bf16-mixed" in dump_recipe(cfg)


def test_a_cpu_rollout_takes_bf16_only_where_its_recipe_was_checked(monkeypatch) -> None:
    """Item 3 of #69: `rollout.precision: auto` on a CPU is bf16 (the hf engine's bf16
    linears) for a recipe whose learning check held, where training is bf16-mixed; fp32 for
    other recipes, fp32 training or another engine, each with its reason; GPUs keep auto.
    rlvr-math held it with a 3-step lr warm-up (#86), which comes with the bf16 rollout only
    and never overrides a warm-up the recipe or the command line set."""
    assert auto_precision.ROLLOUT_BF16_RECIPES == {"rlvr-math": 3}
    monkeypatch.setattr(auto_precision, "ROLLOUT_BF16_RECIPES", {})
    _cpu_speedup(monkeypatch, 4.0)
    unchecked = resolve_auto(_cfg())
    assert unchecked.cfg.rollout.precision == "fp32" and unchecked.cfg.train.warmup_steps == 0
    assert any("has not held rlvr-math's learning check" in x for x in unchecked.lines)
    monkeypatch.setattr(auto_precision, "ROLLOUT_BF16_RECIPES", {"rlvr-math": 3})
    math = resolve_auto(_cfg())
    assert math.cfg.rollout.precision == "bf16"
    (line,) = [x for x in math.lines if x.startswith("rollout.precision")]
    assert "auto → bf16" in line and "rlvr-math's learning suite held" in line
    assert math.cfg.train.warmup_steps == 3
    assert any(x.startswith("train.warmup_steps → 3") for x in math.lines)
    assert resolve_auto(_cfg("train.warmup_steps=0")).cfg.train.warmup_steps == 0  # set: kept
    args = role_args(math.cfg, recipe_plan_input(math.cfg), plan_run(math.cfg).plan)
    assert args.infer.dtype == "float32" and args.infer.bf16_linears
    from rollcli.planning.from_recipe import auto_lines

    assert any(
        x.startswith("algorithm.off_policy.correction auto → tis") for x in auto_lines(math.cfg)
    )
    other = resolve_auto(_cfg("name=my-math"))
    assert other.cfg.rollout.precision == "fp32"
    assert any("has not held my-math's learning check" in x for x in other.lines)
    fp32 = resolve_auto(_cfg("train.precision=fp32"))
    assert fp32.cfg.rollout.precision == "fp32" and fp32.cfg.train.warmup_steps == 0
    assert resolve_auto(_cfg("rollout.precision=int8")).cfg.rollout.precision == "int8"
    _cpu_speedup(monkeypatch, 1.1)  # an AVX2-only CPU: fp32 training, fp32 rollout, no warm-up
    avx2 = resolve_auto(_cfg()).cfg
    assert avx2.rollout.precision == "fp32" and avx2.train.warmup_steps == 0
    gpus = resolve_auto(_cfg("resources.gpus=8", "model=qwen2.5-0.5b"))
    assert gpus.cfg.rollout.precision == "auto"
