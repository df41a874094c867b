"""`roll train sft|dpo|distill --model tiny-random --steps 2` through the CLI app, Ray and
workers; then each run killed (SIGKILL as step 2 starts training: `python -m rollcli` in a
subprocess) and resumed must repeat it: the same metrics step for step and the same final
weights, up to float32 rounding (tests/same_run.py). The distill runs also lose their
teacher worker during step 1 and carry on with a fresh one; sft's trainer dies during step 2
and every worker restarts. `roll train distill-on-policy --model RUN_ID` distils a run's
checkpoint on-policy. Every run but the killed ones is the CLI app in this process, on the
suite's Ray session (tests/roll_in_process.py); the real-CLI run from a shell of the RL
pipeline is tests/e2e/test_rlvr_cli.py's."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from error_text import error_message
from roll_in_process import cli, kills_driver
from roll_subprocess import roll
from same_run import assert_same_run

SMALL = {
    "sft": [
        "sft.batch_size=4",
        "sft.max_tokens=128",
        "rollout.max_new_tokens=4",
    ],
    "dpo": ["dpo.batch_size=4", "dpo.max_response_tokens=16"],
    "distill": [
        "distill.batch_size=4",
        "distill.top_k=8",
        "distill.sft_weight=0.2",
        "rollout.max_new_tokens=4",
    ],
    "distill-on-policy": [
        "distill.student=null",  # the teacher's first layer, as in distill
        "distill.batch_size=4",
        "distill.top_k=8",
        "rollout.max_new_tokens=6",
    ],
}
COMMON = [
    "--model",
    "tiny-random",
    "--steps",
    "2",
    "--save-every",
    "1",
    "--eval-every",
    "1",
    "data.train_size=40",
    "data.val_size=4",
    "train.micro_batch_size=2",
    "train.lr=1e-3",
]
REQUIRED = {
    "sft": {
        "actor/loss",
        "actor/grad_norm",
        "val/loss",
        "val/perplexity",
        "val/accuracy",
        "val/accuracy_ci_low",
        "val/accuracy_ci_high",
        "val/n",
        "perf/train_mfu",
        "perf/train_gflop",
        "perf/peak_gflops",
    },
    "dpo": {
        "actor/loss",
        "rewards/chosen",
        "rewards/rejected",
        "rewards/margin",
        "rewards/accuracy",
        "val/accuracy",
        "val/rewards/accuracy",
        "time/forward_s",
    },
    "distill": {"actor/loss", "actor/distill_loss", "actor/nll", "val/kl", "val/loss"},
    "distill-on-policy": {
        "actor/loss",
        "actor/distill_loss",
        "actor/grad_norm",
        "response/length",
        "response/finished",
        "time/generate_s",
        "time/forward_s",
        "val/kl",
        "val/loss",
        "val/accuracy",
        "val/accuracy_ci_low",
        "val/accuracy_ci_high",
        "val/n",
    },
}
FAULTS = {
    "sft": "kill@train:2",
    "dpo": "kill@train:2",
    "distill": "kill-worker@forward:1,kill@train:2",
    "distill-on-policy": "kill-worker@forward:1,kill@train:2",
}


def train(pipeline: str, run_id: str, runs: Path, fault: str = "") -> tuple[int, str]:
    """`roll train`: in this process, or as a subprocess where a `kill@` fault kills it."""
    args = ["train", pipeline, "--runs-dir", str(runs), "--run-id", run_id, *COMMON]
    if not kills_driver(fault):
        return cli(*args, *SMALL[pipeline], fault=fault)
    result = roll(*args, *SMALL[pipeline], cwd=runs, fault=fault)
    return result.returncode, result.stderr


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model) -> Path:
    return tmp_path_factory.mktemp("runs")


def _reference_run(pipeline: str, runs: Path) -> tuple[str, Path]:
    """The uninterrupted 2-step run of `pipeline` (trained once per module)."""
    run = runs / f"{pipeline}-ref"
    if not (run / "status.json").exists():
        code, err = train(pipeline, f"{pipeline}-ref", runs)
        assert code == 0, err[-3000:]
    return pipeline, run


@pytest.fixture(scope="module", params=["sft", "dpo", "distill"])
def reference(request, runs) -> tuple[str, Path]:
    return _reference_run(request.param, runs)


def test_two_steps_log_every_metric_and_leave_a_loadable_checkpoint(reference) -> None:
    from transformers import AutoModelForCausalLM

    pipeline, run = reference
    rows = _rows(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    for row in rows[1:]:
        assert set(row) >= REQUIRED[pipeline], REQUIRED[pipeline] - set(row)
        assert all(isinstance(v, (int, float)) and v == v for v in row.values())
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    model = AutoModelForCausalLM.from_pretrained(run / "checkpoints" / "step-2")
    if pipeline == "distill":  # the student: the 2-layer teacher's first layer
        assert model.config.num_hidden_layers == 1
        assert {"val/teacher_loss", "val/teacher_accuracy"} <= set(rows[0])


# The kill-and-resume path is the driver loop's, shared by the three: sft's runs by default,
# dpo's and distill's with -m slow (suite time).
@pytest.mark.parametrize(
    "pipeline",
    [
        "sft",
        pytest.param("dpo", marks=pytest.mark.slow),
        pytest.param("distill", marks=pytest.mark.slow),
        pytest.param("distill-on-policy", marks=pytest.mark.slow),
    ],
)
def test_killed_and_resumed_run_repeats_the_reference_exactly(pipeline, runs) -> None:
    pipeline, ref = _reference_run(pipeline, runs)
    run_id = f"{pipeline}-killed"
    code, err = train(pipeline, run_id, runs, fault=FAULTS[pipeline])
    assert code == -signal.SIGKILL, err[-2000:]
    assert (runs / run_id / "checkpoints" / "step-1" / "COMPLETE").exists()
    code, err = cli("resume", run_id, "--runs-dir", str(runs))
    assert code == 0, err[-3000:]
    events = (runs / run_id / "events.log").read_text()
    assert "resuming from checkpoint step-1" in events
    if pipeline.startswith("distill"):
        assert "a worker died during step 1" in events
        assert "retrying from step 1 (the start)" in events
    assert_same_run(runs / run_id, ref, 2)


def test_a_dead_trainer_is_restarted_and_the_run_is_unchanged(runs) -> None:
    """sft's trainer killed during step 2: every worker restarts from checkpoint step-1
    (mid-epoch) in this process, and the run ends as the uninterrupted one did. The rlvr runs
    (a dead rollout worker, then a dead trainer) are tests/runs/test_resume.py's, -m slow."""
    _, ref = _reference_run("sft", runs)
    code, err = train("sft", "sft-dead", runs, fault="kill-worker@train:2")
    assert code == 0, err[-3000:]
    events = (runs / "sft-dead" / "events.log").read_text()
    assert "a worker died during step 2" in events and "restart 1 of 3" in events
    assert "retrying from step 2 (checkpoint step-1)" in events
    assert_same_run(runs / "sft-dead", ref, 2)


def test_resume_refuses_a_finished_run_a_changed_model_and_an_unknown_run(runs) -> None:
    _, ref = _reference_run("sft", runs)
    code, err = cli("resume", ref.name, "--runs-dir", str(runs))
    message = error_message(err)
    assert code == 2 and "already reached step 2" in message and "train.steps=N" in message
    code, err = cli("resume", ref.name, "--runs-dir", str(runs), "model=smollm2-135m")
    assert code == 2 and "model cannot change" in error_message(err)
    code, err = cli("resume", "nope", "--runs-dir", str(runs))
    assert code == 2 and "no run 'nope'" in error_message(err)


def _student_with_another_tokenizer(tiny_model: Path, folder: Path) -> Path:
    """tiny-random with two extra tokens (and embedding rows): another vocabulary."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.add_tokens(["<roll_extra_a>", "<roll_extra_b>"])
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.resize_token_embeddings(len(tokenizer))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_distill_across_tokenizers_trains_the_student_on_the_teachers_answers(
    runs, tiny_model, tmp_path
) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from rollcli.config.errors import ConfigError
    from rollcli.pipelines.distill import _distill_mode

    student = _student_with_another_tokenizer(tiny_model, tmp_path / "student")
    s_tok, t_tok = AutoTokenizer.from_pretrained(student), AutoTokenizer.from_pretrained(tiny_model)
    assert _distill_mode("auto", s_tok, t_tok) == "sequence"
    assert _distill_mode("auto", t_tok, t_tok) == "logits"
    for mode in ("logits", "on_policy"):  # token-level modes need the same vocabulary
        with pytest.raises(ConfigError, match="distill.mode=sequence"):
            _distill_mode(mode, s_tok, t_tok)

    args = ["train", "distill", "--runs-dir", str(runs), "--run-id", "distill-seq", *COMMON]
    code, err = cli(
        *args, f"distill.student={student}", "distill.batch_size=4", "rollout.max_new_tokens=6"
    )
    assert code == 0, err[-3000:]
    run = runs / "distill-seq"
    assert "sequence-level distillation" in (run / "events.log").read_text()
    rows = _rows(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert {"actor/loss", "val/loss", "response/length", "val/accuracy"} <= set(rows[1])
    assert "val/kl" not in rows[1]  # no token-level KL across vocabularies
    samples = [json.loads(line) for line in (run / "samples" / "step-1.jsonl").open()]
    assert len(samples) == 4 and all(isinstance(s["response"], str) for s in samples)
    # the checkpoint is the student (its own vocabulary), not the teacher
    saved = AutoConfig.from_pretrained(run / "checkpoints" / "step-2")
    assert saved.vocab_size == len(s_tok) != len(t_tok)


@pytest.mark.slow  # ~11 s; on-policy distillation's step is tests/workers/test_on_policy_distill.py's
def test_on_policy_distill_of_a_run_id_through_the_cli(runs) -> None:
    """`roll train distill-on-policy --model RUN_ID`: the teacher is that run's newest
    checkpoint (here sft's reference run); the student samples, the teacher scores."""
    _, teacher_run = _reference_run("sft", runs)
    args = ["train", "distill-on-policy", "--runs-dir", str(runs), "--run-id", "on-policy"]
    common = [a for a in COMMON if a not in ("--model", "tiny-random")]
    code, err = cli(*args, *common, "--model", "sft-ref", *SMALL["distill-on-policy"])
    assert code == 0, err[-3000:]
    run = runs / "on-policy"
    recipe = (run / "recipe.yaml").read_text()
    assert f"model: {(teacher_run / 'checkpoints' / 'step-2').resolve()}" in recipe
    assert "on-policy distillation" in (run / "events.log").read_text()
    rows = _rows(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert {"val/kl", "val/teacher_loss", "val/teacher_accuracy"} <= set(rows[0])
    for row in rows[1:]:
        assert set(row) >= REQUIRED["distill-on-policy"], REQUIRED["distill-on-policy"] - set(row)
    for step in (1, 2):  # the student's own answers, one per prompt
        samples = [json.loads(line) for line in (run / "samples" / f"step-{step}.jsonl").open()]
        lengths = [len(s["token_ids"]) for s in samples]
        assert len(samples) == 4 and all(1 <= n <= 6 for n in lengths)
        assert rows[step]["response/length"] == pytest.approx(sum(lengths) / 4)
        assert rows[step]["data/loss_tokens"] == sum(lengths)  # the answers' tokens only
