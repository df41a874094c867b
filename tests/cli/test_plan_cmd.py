"""`roll plan` through the real CLI: no torch or Ray imported, tables, JSON schema, errors,
and `roll train` refusing a plan that cannot fit before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()
GiB = 1024**3


def test_plan_imports_no_torch_or_ray() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rollcli.cli.app import app\n"
        "r = CliRunner().invoke(app, ['plan', 'rlvr-math', '--model', 'qwen2.5-7b', '--gpus', '8',"
        " 'train.strategy=hf'])\n"
        "assert r.exit_code == 1, r.output\n"  # plain hf does not fit: 1, with the advice
        "print(sorted(m for m in ('torch', 'ray', 'deepspeed', 'vllm') if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_qwen25_7b_on_8_gpus_table_and_advice() -> None:
    args = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8", "train.strategy=hf"]
    args += ["--engine", "hf"]
    res = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert res.exit_code == 1, res.output  # does not fit: a script can tell
    assert "qwen2.5-7b · colocated" in res.output
    assert "GPU 0-7" in res.output and "train* infer ref" in res.output
    # hf = plain data parallel: 16 bytes/param of model states do not fit 80 GB
    assert "does not fit" in res.output
    flat = " ".join(res.output.split())  # rich wraps long lines
    assert "`devices.actor_train.zero_stage=3` and `train.strategy=deepspeed` → fits" in flat


def test_json_schema_and_zero3_numbers() -> None:
    args = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8", "--gpu-kind", "h100"]
    args += ["train.strategy=deepspeed", "devices.actor_train.zero_stage=3", "--json"]
    args += ["rollout.engine=vllm", "devices.actor_infer.gpu_memory_utilization=0.5"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert set(plan) == {
        "mode", "fits", "devices", "workers", "advice", "params", "recipe", "auto", "notes"
    }  # fmt: skip
    assert plan["recipe"][0] == "trains qwen2.5-7b for 25 steps at lr 1e-05 (rlvr-math)"
    # the strategy is the recipe's: auto chose only the precision
    assert plan["auto"] == ["train.precision auto → bf16-mixed (GPUs compute in bf16)"]
    assert plan["notes"] == []  # no hub dataset to download
    assert plan["mode"] == "colocated" and plan["fits"] is True and plan["advice"] == []
    assert len(plan["devices"]) == 9 and plan["devices"][8]["roles"] == ["reward"]  # the host
    assert [(w["role"], w["ranks"]) for w in plan["workers"]] == [
        ("actor_train", 8), ("actor_infer", 8), ("reference", 8), ("reward", 1),
    ]  # fmt: skip
    dev = plan["devices"][0]
    assert set(dev) == {"id", "roles", "memory_bytes", "capacity_bytes"}
    assert set(dev["memory_bytes"]) == {
        "weights", "grads", "optimizer", "activations", "kv_cache", "runtime", "total"
    }  # fmt: skip
    assert dev["capacity_bytes"] == 81559 * 1024**2
    # The peak phase is rollout: vLLM holds the whole bf16 model (2 bytes/param, tp=1) and
    # fills 0.5 of the GPU with KV cache; the ZeRO-3 trainer's states (2 + 2 + 12 bytes/param,
    # plus DeepSpeed bf16's 4 of fp32 gradients, / 8 GPUs) and the reference's bf16 weights
    # stay on the GPU (nothing offloads them).
    from rollcli.models.registry import get_model_spec, param_count

    psi = param_count(get_model_spec("qwen2.5-7b"))
    assert plan["params"] == {"total": psi, "active": psi}  # dense: every token runs them all
    mem = dev["memory_bytes"]
    cap = dev["capacity_bytes"]
    assert mem["weights"] == 2 * psi + 2 * psi // 8 + 2 * psi  # vLLM + ZeRO-3 shard + reference
    assert mem["kv_cache"] == int(0.5 * cap) - 2 * psi
    assert (mem["grads"], mem["optimizer"]) == (2 * psi // 8, 16 * psi // 8)
    assert mem["activations"] == 0
    assert mem["total"] == int(0.5 * cap) + 20 * psi // 8 + 2 * psi


def test_qwen3_30b_a3b_on_16_gpus_prints_a_table() -> None:
    res = runner.invoke(app, ["plan", "rlvr-math", "--model", "qwen3-30b-a3b", "--gpus", "16"])
    assert res.exit_code == 1, res.output
    assert "GPU 0-15" in res.output and "advice:" in res.output
    flat = " ".join(res.output.split())  # rich wraps long lines
    assert "MoE of 128 experts, 8 a token: 30.5B parameters, 3.35B active a token" in flat


def test_cpu_plan_without_flags_is_the_run_roll_train_starts() -> None:
    res = runner.invoke(app, ["plan", "rlvr-math", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["mode"] == "cpu" and plan["fits"] is True
    (host,) = plan["devices"]
    assert host["id"] == "cpu"
    assert set(host["roles"]) == {"actor_train", "actor_infer", "reference", "reward"}
    # train.precision (planning/auto_precision.py): fp32 weights are 4 bytes x 135M params
    # and Adam's two states 8; bf16-mixed computes with 2-byte weights and keeps 12 (the
    # fp32 master weights beside the states)
    precision = next(line for line in plan["auto"] if line.startswith("train.precision"))
    weight_bytes, optim_bytes = (2, 12) if "→ bf16-mixed" in precision else (4, 8)
    assert host["memory_bytes"]["weights"] >= 3 * weight_bytes * 134_000_000
    assert host["memory_bytes"]["optimizer"] >= optim_bytes * 134_000_000


def test_device_mapping_errors_name_the_key() -> None:
    res = runner.invoke(
        app, ["plan", "rlvr-math", "--gpus", "4", "devices.actor_infer.device_mapping=0-7"]
    )
    assert res.exit_code == 2
    flat = " ".join(res.output.split())
    assert "actor_infer.device_mapping" in flat and "--gpus 8" in flat
    res = runner.invoke(app, ["plan", "rlvr-math", "--gpus", "4", "devices.actor_infer.tp=3"])
    assert res.exit_code == 2 and "tp=3" in res.output
    res = runner.invoke(
        app,
        ["plan", "rlvr-math", "--gpus", "8", "devices.async_mode=true",
         "devices.actor_train.device_mapping=0-7", "devices.actor_infer.device_mapping=0-7"],
    )  # fmt: skip
    assert res.exit_code == 2 and "async mode" in res.output
    res = runner.invoke(app, ["plan", "rlvr-math", "--gpus", "2", "--gpu-kind", "b300"])
    assert res.exit_code == 2 and "unknown GPU kind" in res.output


def test_async_mode_splits_gpus_by_default() -> None:
    res = runner.invoke(
        app,
        ["plan", "rlvr-math", "--model", "qwen2.5-0.5b", "--gpus", "8", "--json",
         "devices.async_mode=true"],
    )  # fmt: skip
    plan = json.loads(res.output)
    assert plan["mode"] == "colocated"  # reference time-shares actor_train's GPUs
    assert plan["devices"][0]["roles"] == ["actor_train", "reference"]
    assert plan["devices"][7]["roles"] == ["actor_infer"]


def test_train_refuses_a_plan_that_does_not_fit_before_starting(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run(
        [sys.executable, "-m", "rollcli", "train", "rlvr-math", "--model", "qwen2.5-72b",
         "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2
    err = " ".join(res.stderr.split())
    assert "does not fit" in err and "roll plan rlvr-math --model qwen2.5-72b" in err
    assert not any(tmp_path.iterdir())  # no run folder, nothing launched
    res = subprocess.run(
        [sys.executable, "-m", "rollcli", "train", "rlvr-math", "--model", "qwen2.5-7b",
         "--gpus", "8", "train.strategy=hf", "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2
    assert "`devices.actor_train.zero_stage=3`" in " ".join(res.stderr.split())


def test_exit_status_says_whether_the_plan_fits() -> None:
    base = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8", "--json", "--engine", "hf"]
    res = runner.invoke(app, [*base, "train.strategy=hf"])
    assert res.exit_code == 1 and json.loads(res.output)["fits"] is False
    res = runner.invoke(
        app, [*base, "train.strategy=deepspeed", "devices.actor_train.zero_stage=3"]
    )
    assert res.exit_code == 0 and json.loads(res.output)["fits"] is True
    help_text = " ".join(runner.invoke(app, ["plan", "--help"]).output.split())
    assert "0 when the plan fits, 1 when it does not" in help_text


@pytest.mark.parametrize("gpus", [[], ["--gpus", "0"]])
def test_nodes_without_gpus_is_an_error_naming_the_fix(gpus: list[str]) -> None:
    res = runner.invoke(app, ["plan", "rlvr-math", *gpus, "--nodes", "3"])
    assert res.exit_code == 2
    assert "devices.nodes = 3 (--nodes) spreads GPUs over nodes" in res.stderr
    assert "--gpus 24 --nodes 3, or drop --nodes" in " ".join(res.stderr.split())


def test_plan_says_which_off_policy_correction_auto_applies() -> None:
    """`correction: auto` is tis under an int8 rollout and none under fp32: the plan says so
    where it applies one, and not where the recipe names its own."""
    base = ["plan", "rlvr-math", "--json", "rollout.engine=hf"]
    fp32 = json.loads(runner.invoke(app, [*base, "rollout.precision=fp32"]).output)["auto"]
    assert not any("off_policy" in line for line in fp32)
    int8 = json.loads(runner.invoke(app, [*base, "rollout.precision=int8"]).output)["auto"]
    assert any(
        "algorithm.off_policy.correction auto → tis (rollout.precision int8" in line
        for line in int8
    )
    named = [*base, "rollout.precision=int8", "algorithm.off_policy.correction=none"]
    assert not any(
        "off_policy" in line for line in json.loads(runner.invoke(app, named).output)["auto"]
    )
