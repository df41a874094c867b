"""Kill real runs (SIGKILL, Ctrl-C, dead workers) and check that resuming gives the
uninterrupted run: the same metrics step for step and the same final weights, up to float32
rounding (tests/same_run.py says why and how much).

Every run is `roll train` on tiny-random through the real CLI, Ray and workers, with a reward
that raises on some responses and hangs on others (tests/runs/faulty_rewards.py), 4 training
prompts so an epoch ends every 2 steps (checkpoints land on epoch boundaries), a checkpoint
every step. The rlvr runs train the ppo preset: a critic (GAE, KL in the reward) whose
state must resume too.

Every test here runs with -m slow (~2-5 min each: each run starts Ray and its workers). The
default tier keeps a dead worker's restart and the run it repeats, and `roll resume`'s
refusals, on sft in tests/e2e/test_offline_pipelines.py; kill-and-resume exactness there and
in tests/e2e/test_async_rollout.py; per-sample reward errors and timeouts in
tests/rewards (test_reward_deadlines.py, test_runner_batch.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
from pathlib import Path

import pytest
from roll_subprocess import roll as run_roll
from same_run import assert_same_run, untimed

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
# The default tier's runs are 4 steps (two epochs); the slow SIGKILL chain needs 8 steps to
# kill at five points and still finish, and has an 8-step reference of its own.
STEPS = 4
CHAIN_STEPS = 8
ARGS = [
    "--model",
    "tiny-random",
    "--save-every",
    "1",
    "--eval-every",
    "3",
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "data.val_size=4",
    "data.train_size=4",
    "train.micro_batch_size=4",
    "algorithm.name=ppo",
    "algorithm.kl_coef=0.01",
    "algorithm.entropy_coef=0.01",
    "reward.fn=faulty_rewards:flaky",
    "reward.timeout_s=0.5",
]


def _args(steps: int = STEPS) -> list[str]:
    return ["--steps", str(steps), *ARGS]


def roll(*args: str, runs: Path, fault: str = "", ctrl_c_after: tuple[str, int] | None = None):
    """The CLI with this folder's rewards importable; `ctrl_c_after=(run_id, step)`: Ctrl-C
    once that step is in the run's metrics.jsonl. Returns (exit code, stderr)."""
    when = None
    if ctrl_c_after is not None:
        run_id, step = ctrl_c_after
        metrics = runs / run_id / "metrics.jsonl"

        def when() -> bool:
            return step in _steps_logged(metrics)

    result = run_roll(*args, cwd=runs, fault=fault, pythonpath=HERE, ctrl_c_when=when)
    return result.returncode, result.stderr


def _steps_logged(metrics: Path) -> set[int]:
    if not metrics.exists():
        return set()
    out = set()
    for line in metrics.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError, KeyError):
            out.add(json.loads(line)["step"])
    return out


def _status(run: Path) -> str:
    from rollcli.runs.run_dir import RunDir

    return RunDir(run).effective_status()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def reference(runs) -> Path:
    args = ["train", "rlvr", "--runs-dir", str(runs), "--run-id", "ref", *_args()]
    code, err = roll(*args, runs=runs)
    assert code == 0, err[-3000:]
    return runs / "ref"


@pytest.fixture(scope="module")
def reference8(runs) -> Path:
    """The uninterrupted run of the slow SIGKILL chain: 8 steps."""
    args = ["train", "rlvr", "--runs-dir", str(runs), "--run-id", "ref8", *_args(CHAIN_STEPS)]
    code, err = roll(*args, runs=runs)
    assert code == 0, err[-3000:]
    return runs / "ref8"


def test_reference_run_counts_reward_errors_and_keeps_the_samples(reference):
    """A reward that raises or hangs scores 0, is counted, and is logged with its sample."""
    metrics = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(STEPS + 1))
    for m in metrics[1:]:
        rows = [json.loads(x) for x in (reference / f"samples/step-{m['step']}.jsonl").open()]
        errors = [r for r in rows if r["error"]]
        expected = [r for r in rows if _kind(r["response"]) != "score"]
        assert m["reward/errors"] == len(errors) == len(expected)
        assert all(r["reward"] == 0.0 for r in errors)
        for r in errors:
            want = "timeout" if _kind(r["response"]) == "hang" else "ValueError"
            assert want in r["error"], r
    assert sum(m["reward/errors"] for m in metrics[1:]) > 0  # the test exercised errors at all
    assert _status(reference) == "finished"


def _kind(response: str) -> str:
    spec = importlib.util.spec_from_file_location("faulty_rewards", HERE / "faulty_rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kind(response)


@pytest.mark.slow  # ~5 min: six processes, each starting Ray and its workers; the default suite
# keeps kill-and-resume exactness through test_offline_pipelines and test_async_rollout, and
# in-process recovery through the dead-workers test below
def test_sigkill_at_each_phase_then_resume_repeats_the_run_exactly(runs, reference8):
    run = runs / "chain"
    code, err = roll(
        "train", "rlvr", "--runs-dir", str(runs), "--run-id", "chain", *_args(CHAIN_STEPS),
        runs=runs, fault="kill@generate:2+0.2",
    )  # fmt: skip
    assert code == -signal.SIGKILL, err[-2000:]
    assert _status(run) == "killed"

    # killed after checkpoint 3's files are written, before the folder is renamed
    code, err = roll(
        "resume", "chain", "--runs-dir", str(runs), runs=runs, fault="kill@checkpoint:3"
    )
    assert code == -signal.SIGKILL, err[-2000:]
    assert (run / "checkpoints" / ".tmp-step-3" / "model.safetensors").exists()
    assert not (run / "checkpoints" / "step-3").exists()

    # resumes from step-2, an epoch boundary (4 prompts, 2 per step); `--resume auto` too
    code, err = roll(
        "train", "rlvr", "--runs-dir", str(runs), "--run-id", "chain", "--resume", "auto",
        *_args(CHAIN_STEPS),
        runs=runs, fault="kill@reward:4",
    )  # fmt: skip
    assert code == -signal.SIGKILL, err[-2000:]
    code, err = roll("resume", "chain", "--runs-dir", str(runs), runs=runs, fault="kill@train:5")
    assert code == -signal.SIGKILL, err[-2000:]

    # Ctrl-C: the step finishes, a checkpoint is written, the status says stopped
    code, err = roll(
        "resume", "chain", "--runs-dir", str(runs), runs=runs, ctrl_c_after=("chain", 6)
    )
    assert code == 130, err[-2000:]
    assert _status(run) == "stopped"
    last_logged = max(_steps_logged(run / "metrics.jsonl"))
    assert (run / "checkpoints" / f"step-{last_logged}" / "COMPLETE").exists()
    assert "roll resume chain" in err

    code, err = roll("resume", "chain", "--runs-dir", str(runs), runs=runs)
    assert code == 0, err[-3000:]
    assert _status(run) == "finished"

    assert_same_run(run, reference8, CHAIN_STEPS)
    events = (run / "events.log").read_text()
    assert events.count("resuming from checkpoint") == 5
    assert "resuming from checkpoint step-2" in events  # not the half-written step-3
    assert not list((run / "checkpoints").glob(".tmp-*"))  # cleaned by the next checkpoint


def test_dead_workers_are_restarted_and_the_run_is_unchanged(runs, reference):
    """A dead rollout worker (step 3) and a dead trainer (step 4, the last): each time every
    worker (the critic too: the ppo preset) restarts from the newest checkpoint, the second
    time one written mid-epoch, and the run ends as the uninterrupted one did."""
    run = runs / "workers"
    code, err = roll(
        "train", "rlvr", "--runs-dir", str(runs), "--run-id", "workers", *_args(),
        runs=runs, fault="kill-worker@generate:3,kill-worker@train:4",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    events = (run / "events.log").read_text()
    assert "a worker died during step 3" in events
    assert "a worker died during step 4" in events
    assert "restart 2 of 3" in events
    assert "retrying from step 3 (checkpoint step-2)" in events
    assert "retrying from step 4 (checkpoint step-3)" in events
    assert_same_run(run, reference, STEPS)


# ---- agentic: episodes played by env workers and the model in lockstep rounds ------------
# The agentic resume of a run cut back to its step-1 checkpoint is in
# tests/agentic/test_agentic_cli.py (-m slow, on its frozenlake run); the SIGKILL runs are here.
AGENTIC_STEPS = 3
AGENTIC_ARGS = [
    "--model", "tiny-random", "--steps", str(AGENTIC_STEPS), "--save-every", "1",
    "--eval-every", "2", "agentic.group_size=2", "agentic.groups_per_step=2",
    "agentic.val_episodes=2", "agentic.max_turns=3", "agentic.num_env_workers=2",
    "rollout.max_new_tokens=4", "train.micro_batch_size=2", "agentic.keep_top_groups=1.0",
    "train.lr=1e-3", "run.keep_last=5",
    "warmup=null",  # the recipe's warm-up (1600 expert episodes) is tested in tests/agentic
]  # fmt: skip


def _agentic(run_id: str, runs: Path, fault: str = "", *extra: str) -> tuple[int, str]:
    args = ["train", "agentic-frozenlake", "--runs-dir", str(runs), "--run-id", run_id]
    return roll(*args, *AGENTIC_ARGS, *extra, runs=runs, fault=fault)


def _same_agentic_run(run: Path, ref: Path) -> None:
    assert [m["step"] for m in untimed(run)] == list(range(AGENTIC_STEPS + 1))
    for step in range(1, AGENTIC_STEPS + 1):
        episodes = (run / "samples" / f"step-{step}.jsonl").read_text()
        assert episodes == (ref / "samples" / f"step-{step}.jsonl").read_text()
    assert_same_run(run, ref, AGENTIC_STEPS)


@pytest.mark.slow  # ~2 min: three processes, each starting Ray and its workers; the default
# suite keeps the resume from a checkpoint (tests/agentic/test_agentic_cli.py) and the
# lockstep rounds (tests/agentic/test_lockstep_rollout.py)
def test_sigkilled_agentic_run_resumes_exactly(runs) -> None:
    """Killed while its step-2 episodes are being played, an agentic run resumes from
    checkpoint 1 and ends with the uninterrupted run's episodes, and its metrics and weights
    up to float32 rounding."""
    code, err = _agentic("agentic-ref", runs)
    assert code == 0, err[-3000:]
    code, err = _agentic("agentic-killed", runs, fault="kill@generate:2+0.3")
    assert code == -signal.SIGKILL, err[-2000:]
    code, err = roll("resume", "agentic-killed", "--runs-dir", str(runs), runs=runs)
    assert code == 0, err[-3000:]

    ref, run = runs / "agentic-ref", runs / "agentic-killed"
    assert "resuming from checkpoint step-1" in (run / "events.log").read_text()
    _same_agentic_run(run, ref)


@pytest.mark.slow  # ~2 min: three processes
def test_sigkilled_async_agentic_run_resumes_exactly(runs) -> None:
    """Async (`rollout.max_staleness=1`): step 3's episodes are played in the background
    while step 2 trains, on step 1's weights. Killed then, the run resumes from checkpoint 1,
    whose saved episodes for step 2 it uses, and ends with the uninterrupted run's weights,
    metrics and episodes; the sampler's log-probs reweight the stale episodes."""
    stale = ("rollout.max_staleness=1", "algorithm.off_policy.correction=tis")
    code, err = _agentic("async-ref", runs, "", *stale)
    assert code == 0, err[-3000:]
    code, err = _agentic("async-killed", runs, "kill@train:2+0.3", *stale)
    assert code == -signal.SIGKILL, err[-2000:]
    code, err = roll("resume", "async-killed", "--runs-dir", str(runs), runs=runs)
    assert code == 0, err[-3000:]

    ref, run = runs / "async-ref", runs / "async-killed"
    assert "resuming from checkpoint step-1" in (run / "events.log").read_text()
    _same_agentic_run(run, ref)
    steps = untimed(ref)[1:]
    assert [m["rollout/staleness"] for m in steps] == [0.0, 1.0, 1.0]
    assert all(m["rollout/mismatch_ratio_mean"] > 0.0 for m in steps)


@pytest.mark.slow  # ~2 min: three processes
def test_sigkilled_agent_program_run_resumes_exactly(runs) -> None:
    """An agent program's run (`agentic.agent`, roll's OpenAI endpoint), killed while its
    step-2 programs are talking to the endpoint, resumes from checkpoint 1 and ends with the
    uninterrupted run's weights, metrics and episodes: rounds, not arrival order, decide
    what each request is sampled with."""
    if importlib.util.find_spec("openai") is None:
        pytest.skip("needs the agents extra")
    agent = ("agentic.agent=resume_agent:run_episode", "warmup=null")

    def run(run_id: str, fault: str = "") -> tuple[int, str]:
        args = ["train", "agentic-tool-math-agent", "--runs-dir", str(runs), "--run-id", run_id]
        extra = [a for a in AGENTIC_ARGS if a != "warmup=null"]
        return roll(*args, *extra, *agent, runs=runs, fault=fault)

    code, err = run("agent-ref")
    assert code == 0, err[-3000:]
    code, err = run("agent-killed", "kill@generate:2+0.3")
    assert code == -signal.SIGKILL, err[-2000:]
    code, err = roll("resume", "agent-killed", "--runs-dir", str(runs), runs=runs)
    assert code == 0, err[-3000:]

    ref, killed = runs / "agent-ref", runs / "agent-killed"
    assert "resuming from checkpoint step-1" in (killed / "events.log").read_text()
    _same_agentic_run(killed, ref)
    assert all(m["rollout/gen_calls"] == 2.0 for m in untimed(ref)[1:])
