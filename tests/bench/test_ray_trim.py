"""bench/ray_trim.py: the Ray the GPU kit carries. The trim of a Ray-shaped folder (fast), and
the same trim of a copy of this venv's own Ray running `roll train` through the real CLI
(slow: ~2 min on 2 busy cores), so nothing roll needs is trimmed away."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from roll_subprocess import roll

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fake_ray(root: Path) -> Path:
    """A `ray/` folder of Ray's layout: the removed parts, kept parts and three binaries
    (copies of this Python's own executable, which has symbols to strip or not)."""
    ray = root / "ray"
    for part in ("jars", "dashboard/client/build", "tune", "rllib", "util", "_private"):
        (ray / part).mkdir(parents=True)
        (ray / part / "x.py").write_text("x = 1\n" * 1000)
    (ray / "__init__.py").write_text("")
    (ray / "dashboard" / "agent.py").write_text("")
    for binary in _load("ray_trim").STRIPPED:
        (ray / binary).parent.mkdir(parents=True, exist_ok=True)
        (ray / binary).write_bytes(Path(sys.executable).resolve().read_bytes())
    return ray


def test_the_trim_removes_the_listed_parts_keeps_the_core_and_strips_in_place(tmp_path):
    trim = _load("ray_trim")
    ray = _fake_ray(tmp_path)
    lines = trim.trim(ray)
    for gone in ("jars", "dashboard/client", "tune", "rllib"):
        assert not (ray / gone).exists()
        assert any(line.startswith(f"removed ray/{gone} (") for line in lines)
    # absent parts (train, serve, ...) are skipped, not reported
    assert not any("ray/serve" in line for line in lines)
    assert (ray / "util" / "x.py").is_file() and (ray / "dashboard" / "agent.py").is_file()
    assert sum(line.startswith("stripped ") for line in lines) == 3
    assert all((ray / b).is_file() for b in trim.STRIPPED)


def test_the_trim_refuses_a_folder_that_is_not_ray(tmp_path):
    trim = _load("ray_trim")
    (tmp_path / "notray").mkdir()
    with pytest.raises(FileNotFoundError, match="not an unpacked `ray` package"):
        trim.trim(tmp_path / "notray")


def test_rays_dependencies_for_312_are_its_metadata_closure_without_extras():
    trim = _load("ray_trim")
    deps = trim.requirements("ray")
    # Ray 2.60's own list (click, filelock, jsonschema, msgpack, packaging, protobuf, pyyaml,
    # requests), jsonschema's (referencing, rpds-py, ...), none of its extras (aiohttp, grpcio)
    assert {"jsonschema", "referencing", "rpds-py", "msgpack", "click"} <= deps
    assert not deps & {"aiohttp", "grpcio", "ray"}


def test_the_kit_carries_exactly_the_ray_dependencies_the_gpu_image_lacks():
    kit = _load("gpu_kit")
    assert kit.ray_dependencies() == [
        "jsonschema",
        "jsonschema-specifications",
        "referencing",
        "rpds-py",
    ]


@pytest.mark.slow  # 137 s on 2 busy cores: Ray's start and the workers' dominate
def test_roll_train_runs_one_step_on_the_trimmed_ray(tmp_path, tiny_model):
    trim = _load("ray_trim")
    import ray

    site = tmp_path / "site"
    lines = trim.trimmed_copy(Path(ray.__file__).parent, site)
    assert sum(line.startswith("removed ") for line in lines) >= 9
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    where = subprocess.run(
        [sys.executable, "-c", "import ray; print(ray.__file__)"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(site), where  # the trimmed copy, not the venv's Ray
    runs = tmp_path / "runs"
    done = roll(
        "train", "rlvr-math", "--model", "tiny-random", "--steps", "1", "--runs-dir", str(runs),
        "--run-id", "t", "rollout.batch_size=4", "rollout.group_size=2",
        "rollout.max_new_tokens=8", "data.val_size=4", "data.train_size=8",
        "train.micro_batch_size=4", "run.eval_every=0",
        cwd=tmp_path, pythonpath=site,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(x) for x in (runs / "t" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "actor/grad_norm" in r] == [1]
