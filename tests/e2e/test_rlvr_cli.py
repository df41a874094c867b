"""`roll train rlvr-math` on tiny-random through the real CLI, real Ray and real workers."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest
import torch
import yaml
from roll_subprocess import roll
from tracker_readers import (
    swanlab_records,
    swanlab_scalars,
    wandb_history,
    wandb_records,
    wandb_table_steps,
)

from rollcli.evaluation.stats import wilson_interval

REQUIRED_STEP_METRICS = {
    "step",
    "reward/mean",
    "reward/std",
    "actor/pg_loss",
    "actor/kl",
    "actor/entropy",
    "actor/grad_norm",
    "response_length/mean",
    "time/step_s",
    "time/generate_s",
    "time/train_s",
    "time/weight_sync_s",
    "time/sync_check_s",  # every weight sync is verified (rollcli/pipelines/rl/sync_verify.py)
    "sync/verified",
    "rollout/tokens_per_s",
    "perf/generate_mfu",
    "perf/forward_mfu",
    "perf/train_mfu",
    "perf/peak_gflops",
    # the sampler (hf engine) vs the trainer, logged whatever algorithm.off_policy is
    "rollout/mismatch_kl",
    "rollout/mismatch_ratio_mean",
    "rollout/mismatch_ratio_min",
    "rollout/mismatch_ratio_max",
    "rollout/mismatch_outside_band",
}
SMALL = [
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "data.val_size=4",
    "data.train_size=50",
    "train.micro_batch_size=4",
]


# the optional trackers that are installed (`make test` installs both) log this run too
TRACKERS = ["jsonl", "tensorboard"] + [t for t in ("swanlab", "wandb") if find_spec(t)]


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory, tiny_model) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    result = roll(
        "train",
        "rlvr",
        "--model",
        "tiny-random",
        "--steps",
        "2",
        "--runs-dir",
        str(runs),
        "--run-id",
        "t",
        "--save-every",
        "1",
        *SMALL,
        "algorithm.kl_coef=0.01",
        "algorithm.entropy_coef=0.01",  # random weights score 0: the entropy bonus still moves them
        f"run.trackers=[{','.join(TRACKERS)}]",
        cwd=runs,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for banner in ("swanlab:", "wandb:"):  # the trackers' start-up lines go to trackers.log
        assert banner not in result.stdout + result.stderr
    return runs / "t"


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_metrics_have_every_required_key_each_step(grpo_run: Path) -> None:
    rows = _metrics(grpo_run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "val/accuracy" in rows[0] and "val/accuracy" in rows[-1]
    for row in (rows[0], rows[-1]):  # validation: 4 distinct problems, with a Wilson interval
        assert row["val/n"] == 4
        low, high = wilson_interval(round(row["val/accuracy"] * 4), 4)
        assert (row["val/accuracy_ci_low"], row["val/accuracy_ci_high"]) == (low, high)
    assert "95% CI" in (grpo_run / "events.log").read_text()
    for row in rows[1:]:
        assert set(row) >= REQUIRED_STEP_METRICS, REQUIRED_STEP_METRICS - set(row)
        assert all(
            isinstance(v, (int, float)) and v == v for v in row.values()
        )  # finite numbers, no NaN


def test_perf_metrics_are_the_flop_model_over_time_and_peak(grpo_run: Path) -> None:
    from rollcli.models.registry import TINY_RANDOM
    from rollcli.tracking.flops import FlopModel

    peak = json.loads((grpo_run / "perf_peak.json").read_text())  # measured once, on actor_train
    # the trainer's compute dtype: bf16 where train.precision auto chose bf16-mixed
    precision = yaml.safe_load((grpo_run / "recipe.yaml").read_text())["train"]["precision"]
    dtype = "bfloat16" if precision == "bf16-mixed" else "float32"
    assert (peak["source"], peak["device"], peak["dtype"]) == ("measured", "cpu", dtype)
    assert "perf: matmul peak" in (grpo_run / "events.log").read_text()
    model = FlopModel.from_spec(TINY_RANDOM)
    per_token = 2 * (model.params_per_token + model.hidden * model.vocab)  # + attention
    for row in _metrics(grpo_run)[1:]:
        assert row["perf/peak_gflops"] == peak["flops"] / 1e9
        for phase in ("generate", "forward", "train"):
            mfu, gflop = row[f"perf/{phase}_mfu"], row[f"perf/{phase}_gflop"]
            assert mfu > 0  # no upper bound: the peak and the phase are timed apart (load)
            assert mfu == pytest.approx(gflop / (row[f"time/{phase}_s"] * peak["flops"] / 1e9))
        # grpo, kl in the loss, one epoch on-policy: the forward is the reference's only, and
        # training is forward + backward (3 forwards) over the same tokens
        assert row["perf/train_gflop"] == pytest.approx(3 * row["perf/forward_gflop"])
        # the log-prob forward computes every response token (8 rows) and each group's
        # prompt once (shared prefix): more than the response tokens' matmuls alone
        responses = 8 * row["response_length/mean"]
        assert row["perf/forward_gflop"] > per_token * responses / 1e9
        # generation feeds back all but each response's last token
        assert row["perf/generate_gflop"] > per_token * (responses - 8) / 1e9


@pytest.mark.parametrize("tracker", ["swanlab", "wandb"])
def test_trackers_hold_every_metric_of_every_step(grpo_run: Path, tracker: str) -> None:
    if tracker not in TRACKERS:
        pytest.skip(f"{tracker} is not installed (pip install roll-rl[{tracker}])")
    expected = {
        (k, row["step"]): float(v)
        for row in _metrics(grpo_run)
        for k, v in row.items()
        if k not in ("step", "time")
    }
    if tracker == "swanlab":
        (folder,) = (grpo_run / "swanlab").glob("run-*")
        records = swanlab_records(folder)
        logged = swanlab_scalars(records)
        samples = [(r.media.step, len(r.media.value.items)) for r in records if r.HasField("media")]
    else:
        (folder,) = (grpo_run / "wandb").glob("offline-run-*")
        records = wandb_records(folder)
        logged = wandb_history(records)
        tables = sorted((folder / "files" / "media" / "table").glob("samples_*.table.json"))
        sizes = [len(json.loads(t.read_text())["data"]) for t in tables]  # in logging order
        samples = list(zip(wandb_table_steps(records), sizes, strict=True))
    assert logged == pytest.approx(expected)
    assert samples == [(1, 8), (2, 8)]  # each step's 8 samples as the tracker's table


def test_run_folder_holds_recipe_samples_status_and_tensorboard(grpo_run: Path) -> None:
    recipe = yaml.safe_load((grpo_run / "recipe.yaml").read_text())
    assert (
        recipe["model"] == "tiny-random"
        and recipe["train"]["steps"] == 2
        and recipe["algorithm"]["kl_coef"] == 0.01
    )
    samples = [
        json.loads(line)
        for line in (grpo_run / "samples" / "step-1.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 8
    assert {"prompt", "response", "reward", "answer"} <= set(samples[0])
    assert json.loads((grpo_run / "status.json").read_text())["status"] == "finished"
    assert list((grpo_run / "tensorboard").glob("events.out.tfevents.*"))
    events = (grpo_run / "events.log").read_text()
    assert "checkpoint written" in events and "finished" in events


def test_checkpoint_is_a_hugging_face_folder_that_transformers_loads(
    grpo_run: Path, tiny_model: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = grpo_run / "checkpoints" / "step-2"
    assert (ckpt / "COMPLETE").exists() and (ckpt / "model.safetensors").exists()
    assert not list((grpo_run / "checkpoints").glob(".tmp-*"))
    model = AutoModelForCausalLM.from_pretrained(ckpt)
    AutoTokenizer.from_pretrained(ckpt)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model)
    changed = [
        name
        for (name, a), b in zip(
            model.state_dict().items(), initial.state_dict().values(), strict=True
        )
        if not torch.equal(a, b)
    ]
    assert changed, "two training steps left every weight unchanged"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["sampler"]["position"] == 4  # 2 steps x 2 prompts


def test_keep_last_prunes_older_checkpoints(grpo_run: Path) -> None:
    assert sorted(p.name for p in (grpo_run / "checkpoints").iterdir()) == ["step-1", "step-2"]


def test_runs_ls_shows_the_finished_run(grpo_run: Path) -> None:
    result = roll("runs", "ls", "--runs-dir", str(grpo_run.parent), cwd=grpo_run.parent)
    assert result.returncode == 0
    row = next(line for line in result.stdout.splitlines() if line.split()[:1] == ["t"])
    assert "finished" in row and "2/2" in row


@pytest.mark.slow  # ~40 s; the ppo preset's critic runs by default in tests/e2e/test_presets.py
def test_ppo_trains_a_critic_with_kl_in_the_reward(tmp_path: Path, tiny_model) -> None:
    result = roll(
        "train",
        "rlvr",
        "--model",
        "tiny-random",
        "--steps",
        "1",
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "p",
        "--eval-every",
        "0",
        *SMALL,
        "algorithm.name=ppo",
        "algorithm.kl_coef=0.05",
        "algorithm.kl_in=reward",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    row = _metrics(tmp_path / "p")[-1]
    assert {"critic/vf_loss", "critic/grad_norm", "actor/kl_reward", "actor/kl"} <= set(row)
    assert (tmp_path / "p" / "checkpoints" / "step-1" / "critic.pt").exists()


@pytest.mark.slow  # ~40 s, a run of its own; the time limit is run_control's, shared by every
# pipeline: the default suite keeps it in tests/pipelines/test_driver.py (the crossing step
# validated and checkpointed, the same events line)
def test_time_limit_stops_after_the_crossing_step_with_validation_and_checkpoint(
    tmp_path: Path, tiny_model
) -> None:
    result = roll(
        "train",
        "rlvr",
        "--model",
        "tiny-random",
        "--steps",
        "5",
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "tl",
        "--eval-every",
        "0",
        *SMALL,
        "run.time_limit_min=0.0001",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _metrics(tmp_path / "tl")
    assert [r["step"] for r in rows] == [0, 1]
    assert "val/accuracy" in rows[-1]
    assert (tmp_path / "tl" / "checkpoints" / "step-1" / "COMPLETE").exists()
    assert (
        "time limit of 0.0001 min reached after step 1"
        in (tmp_path / "tl" / "events.log").read_text()
    )
