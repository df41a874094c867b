"""The GPU proof kit on CPU (bench/gpu_proof.py --device cpu): the same code that runs on a
lent GPU, so the kit cannot rot unnoticed; and gpu_kit's import check without Ray."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_kit_runs_every_case_on_cpu_without_ray(tmp_path):
    # the GPU machine has no Ray: here a `ray` package that refuses to import shadows it
    (tmp_path / "no_ray" / "ray").mkdir(parents=True)
    (tmp_path / "no_ray" / "ray" / "__init__.py").write_text(
        "raise ImportError('no Ray on the GPU machine')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "no_ray")}
    out = tmp_path / "proof.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_proof.py"), "--device", "cpu"]
        + ["--models", "tiny-random", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    cases = {r["case"]: r for r in rows}
    assert set(cases) == {
        "peak",
        "train-hf",
        "train-zero2",
        "train-zero3",
        "train-fsdp2",
        "generate-b4",
        "generate-b4-dynamic",
        "grpo-step",
    }
    for name in ("train-hf", "train-zero2", "train-zero3", "train-fsdp2"):
        row = cases[name]
        assert row["loss_finite"] and row["step_s"] > 0 and 0 < row["mfu"] < 2
        assert row["planned_gib"] > 0  # roll plan's actor_train for the same shapes
    gen = cases["generate-b4"]
    # 4 prompts, at most 8 new tokens each; the stop block ends some early
    assert 4 <= gen["new_tokens"] <= 32 and gen["tokens_per_s"] > 0
    # the static decode (forced on the CPU) samples the dynamic decode's greedy tokens
    assert gen["decode"] == "static" and gen["greedy_equal"] == 4
    assert gen["greedy_first_logprob_diff"] < 1e-4
    assert cases["generate-b4-dynamic"]["new_tokens"] >= 4
    grpo = cases["grpo-step"]
    assert set(grpo["phases_s"]) == {
        "generate",
        "old_logprobs",
        "ref_logprobs",
        "train",
        "weight_sync",
    }
    assert grpo["samples"] == 4 and all(v > 0 for v in grpo["phases_s"].values())
    assert "| tiny-random | zero3 |" in done.stdout and "weight_sync" in done.stdout


def test_the_stop_block_makes_responses_end_near_half_the_budget():
    cases = _load("gpu_proof_cases")
    ids = cases.stop_ids(151936, 256)
    assert len(ids) == round(2 * 151936 / 256) and max(ids) == 151935


def test_a_gpu_gives_each_deepspeed_stage_and_fsdp2_a_process_and_a_cpu_one_in_all():
    kit = _load("gpu_proof")
    cases = "hf,zero2,zero3,fsdp2,generate,grpo"
    assert kit.process_groups(cases) == ["hf,generate,grpo", "zero2", "zero3", "fsdp2"]
    assert kit.process_groups(cases, "cpu") == [cases]


def test_the_import_check_names_packages_the_gpu_machine_lacks(tmp_path):
    kit = _load("gpu_kit")
    # nothing carried: pydantic (the config layer) is neither in the image nor carried
    problems = kit.import_check(tmp_path)
    assert len(problems) == 1 and "pydantic" in problems[0] and "ray" not in problems[0]


@pytest.mark.slow  # ~8 min on 2 busy cores: three CLI runs, each starting Ray and its workers
def test_the_train_cli_case_kills_and_resumes_on_cpu(tmp_path):
    out = tmp_path / "proof.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_proof.py"), "--device", "cpu"]
        + ["--models", "tiny-random", "--cases", "train-cli", "--json", str(out)]
        + ["--model-timeout", "900"],
        capture_output=True,
        text=True,
        timeout=960,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    # the rows as the jsonl had them when each part ended: ray, train, resume
    assert [r["part"] for r in rows] == ["ray", "train", "resume"]
    ray, train, resume = rows
    assert ray["ray"] and ray["init_s"] > 0
    assert train["killed"] and train["exit"] == -9 and train["steps"] == [1, 2, 3]
    assert "step-3" in train["checkpoints"]
    assert resume["exit"] == 0 and resume["steps"] == [1, 2, 3, 4]
    assert any(k.startswith("time/") for k in resume["phases_s"]["4"])
    roles = resume["memory"]["roles"]
    assert {"actor_train", "actor_infer", "reference"} <= set(roles)
    assert all(roles[r]["measured_gib"] > 0 and roles[r]["planned_gib"] > 0 for r in roles
               if r != "driver")  # fmt: skip
    assert any("resum" in line for line in resume["events_tail"])
    assert "| tiny-random | resume | 0 |" in done.stdout
