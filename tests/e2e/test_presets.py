"""Every algorithm preset trains tiny-random for 2 steps through the CLI on one Ray session,
on the workers `roll plan` prints for it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from error_text import error_message
from planned_workers import assert_clusters_are_planned
from typer.testing import CliRunner

import rollcli.pipelines.rl.pipeline as rl_pipeline
from rollcli.cli.app import app
from rollcli.config.presets import PRESETS
from rollcli.runtime.workers_setup import build_clusters

SMALL = [
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "data.val_size=2",
    "data.train_size=40",
    "train.micro_batch_size=8",
    "run.trackers=[jsonl]",
    "rollout.num_workers=2",  # the plan's engine ranks, checked on the started workers
    "resources.num_cpus=2",
]


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


# The one preset with a path no other default test trains runs by default: ppo (critic +
# GAE, KL in the reward; its five roles are also the default check that a run's workers are
# the plan's; tests/pipelines/test_build_clusters.py checks bare builds, with -m slow); every
# other preset only with -m slow (suite time). grpo, the group
# baseline, is rlvr-math's own preset: tests/e2e/test_rlvr_cli.py trains it by default (every
# metric key, finite, each step). dapo's distinct path, dynamic sampling with over-sampling,
# trains by default in tests/e2e/test_async_rollout.py; its overlong penalty and clip-higher
# are checked by hand in tests/algorithms (test_dapo_off_policy.py, test_policy_loss.py) and
# through the RL step in tests/pipelines/test_rl_advantages.py. gspo's sequence-level ratio
# is checked by hand in tests/algorithms/test_policy_loss.py, which also calls it by name
# through `compute_policy_loss` (the worker's one call, trained by ppo and grpo here), and
# its keys reaching the update in tests/agentic/test_algorithm_keys.py.
DEFAULT_TIER = {"ppo"}


@pytest.mark.parametrize(
    "preset",
    [p if p in DEFAULT_TIER else pytest.param(p, marks=pytest.mark.slow) for p in sorted(PRESETS)],
)
def test_preset_trains_two_steps_with_finite_metrics(
    preset: str, tmp_path: Path, tiny_model, monkeypatch
) -> None:
    knobs = [*SMALL, f"algorithm.name={preset}"]
    plan = CliRunner().invoke(app, ["plan", "rlvr", "--model", "tiny-random", "--json", *knobs])
    assert plan.exit_code == 0, plan.output
    planned = json.loads(plan.output)["workers"]
    checked: list[AssertionError | None] = []

    def build_and_check(*args, **kwargs):
        clusters = build_clusters(*args, **kwargs)  # the real one
        try:
            assert_clusters_are_planned(clusters, planned, args[0].pipeline)
            checked.append(None)
        except AssertionError as e:  # raised below, after the run has stopped its workers
            checked.append(e)
        return clusters

    monkeypatch.setattr(rl_pipeline, "build_clusters", build_and_check)
    args = ["train", "rlvr", "--model", "tiny-random", "--steps", "2", "--eval-every", "0",
            "--runs-dir", str(tmp_path), "--run-id", preset, *knobs]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr[-2000:]
    assert len(checked) == 1, "the workers started once"
    if checked[0] is not None:
        raise checked[0]
    rows = [
        json.loads(line) for line in (tmp_path / preset / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in rows] == [0, 1, 2]
    for row in rows[1:]:
        assert "actor/pg_loss" in row and "actor/grad_norm" in row
        assert all(math.isfinite(v) for v in row.values()), row
    recipe = (tmp_path / preset / "recipe.yaml").read_text()
    assert f"name: {preset}" in recipe
    if preset == "ppo":  # the roles as planned by hand: five, two engine ranks
        assert [(w["role"], w["ranks"]) for w in planned] == [
            ("actor_train", 1), ("actor_infer", 2), ("reference", 1), ("critic", 1), ("reward", 1)
        ]  # fmt: skip


def test_unknown_preset_and_knob_fail_with_did_you_mean() -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["train", "rlvr", "algorithm.name=rlo"])
    assert bad.exit_code == 2 and "did you mean 'rloo'" in error_message(bad.stderr)
    bad = runner.invoke(app, ["train", "rlvr", "algorithm.kl_coeff=0.1"])
    assert bad.exit_code == 2 and "did you mean 'algorithm.kl_coef'" in error_message(bad.stderr)
