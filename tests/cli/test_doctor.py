"""`roll doctor`: backends with versions from package metadata, the recipe check, and the
orphaned-Ray-process finder on a process table."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.cli.doctor_cmd import Proc, orphaned_ray, read_processes

runner = CliRunner()


def test_doctor_lists_backends_and_versions() -> None:
    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert version("torch") in res.output and version("ray") in res.output
    for name in ("vllm", "deepspeed", "megatron-core", "sglang"):
        assert name in res.output
    assert "GPUs visible:" in res.output and "sandbox isolation:" in res.output


def test_doctor_says_megatron_trains_nowhere_not_gpu_only(monkeypatch) -> None:
    """It said "GPU only" of an installed megatron-core, which trains on no machine."""
    import rollcli.planning.backends as backends

    monkeypatch.setattr(backends, "is_installed", lambda b: True)
    monkeypatch.setattr(backends, "version_of", lambda b: "1.0")
    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    megatron = next(line for line in res.output.splitlines() if "megatron-core" in line)
    assert "cannot train yet: no weight map (docs/gpu.md)" in megatron
    assert "GPU only" not in megatron
    assert "GPU only" in next(line for line in res.output.splitlines() if "│ sglang" in line)


def test_doctor_recipe_names_what_is_missing() -> None:
    res = runner.invoke(app, ["doctor", "rlvr-math"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "everything it needs is here" in res.output
    res = runner.invoke(
        app, ["doctor", "rlvr-math", "rollout.engine=sglang", "--gpus", "1"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 1
    assert "rollout.engine: sglang needs sglang, not installed" in res.output
    # what no machine could run is the recipe's error (as for train and plan), not a miss
    res = runner.invoke(
        app, ["doctor", "rlvr-math", "rollout.engine=sglang"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 2 and "sglang runs on GPUs only" in res.output


def test_orphaned_ray_processes() -> None:
    procs = [
        Proc(100, 50, "python train.py"),  # a live driver ...
        Proc(101, 100, "/ray/core/src/ray/raylet/raylet --node"),  # ... owns its raylet
        Proc(200, 1, "/ray/core/src/ray/raylet/raylet --node"),  # driver gone: re-parented
        Proc(201, 200, "python -m ray.dashboard.agent dashboard_agent"),  # raylet's child
        Proc(300, 999, "python runtime_env_agent.py"),  # parent no longer exists
    ]
    assert [p.pid for p in orphaned_ray(procs)] == [200, 300]
    assert any(p.pid == 1 or p.ppid == 0 for p in read_processes())  # /proc is read


def test_doctor_lists_trackers_and_where_they_log(monkeypatch) -> None:
    for var in ("WANDB_MODE", "WANDB_API_KEY", "SWANLAB_MODE", "SWANLAB_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    res = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    lines = {line.split("│")[1].strip(): line for line in res.output.splitlines() if "│" in line}
    assert "local: runs/<run-id>/metrics.jsonl" in lines["jsonl"]
    assert "local: runs/<run-id>/tensorboard/" in lines["tensorboard"]
    for name in ("swanlab", "wandb"):  # installed by `make test`; else the pip line
        assert f"offline: runs/<run-id>/{name}/" in lines[name] or f"roll-rl[{name}]" in lines[name]
    res = runner.invoke(
        app,
        ["doctor", "rlvr-math", "run.trackers=[jsonl,wandb]"],
        env={"COLUMNS": "200", "WANDB_MODE": "online", "WANDB_API_KEY": ""},
    )
    assert res.exit_code == 1
    assert "wandb is asked to log online but WANDB_API_KEY is not set" in res.output
    res = runner.invoke(
        app,
        ["doctor", "rlvr-math", "run.trackers=[jsonl,wandb]", "run.tracker_project=mine"],
        env={"COLUMNS": "200", "WANDB_MODE": "online", "WANDB_API_KEY": "secret"},
    )
    assert "online: project 'mine'" in res.output


def test_doctor_takes_the_model_of_the_run_it_checks() -> None:
    """`roll doctor rlvr-math --model tiny-random` was refused (no such option), so the
    check could not be of the run one meant to start."""
    res = runner.invoke(app, ["doctor", "rlvr-math", "--model", "tiny-random"])
    assert res.exit_code == 0, res.output
    assert "recipe rlvr-math: everything it needs is here" in res.output
    # the model is the run's: a name roll cannot plan is refused as `roll train` refuses it
    res = runner.invoke(app, ["doctor", "rlvr-math", "--model", "qwen-7b"])
    assert res.exit_code == 2
    assert "cannot plan model 'qwen-7b': unknown model" in " ".join(res.stderr.split())
    alone = runner.invoke(app, ["doctor", "--model", "tiny-random"])
    assert alone.exit_code == 2
    assert "roll doctor RECIPE --model M" in " ".join(alone.stderr.split())
