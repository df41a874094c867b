"""A reward that cannot run stops the run with one line, instead of training on zeros
(issue #22, item 5), nor reads as a model that answers nothing in `roll eval` (issue #81),
through the CLI app in this process and real Ray (tiny-random)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from error_text import error_message, flat
from roll_in_process import cli

pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


SMALL = [
    "--model", "tiny-random", "--steps", "3", "--eval-every", "0", "data.train_size=8",
    "data.val_size=2", "rollout.group_size=2", "rollout.batch_size=4",
    "rollout.max_new_tokens=4",
]  # fmt: skip


def test_a_reward_with_the_wrong_signature_is_refused_before_ray(tmp_path, monkeypatch) -> None:
    """Issue #81: the checks before a run call the reward on the first prompts; a call that
    cannot be made is one line naming it, before Ray starts and before the run folder."""
    from rollcli.distributed import ray_session

    monkeypatch.setattr(ray_session, "start_ray", lambda *a, **k: pytest.fail("Ray started"))
    code, err = cli(
        "train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "broken", *SMALL,
        "reward.fn=broken_rewards:wrong_signature",
    )  # fmt: skip
    assert code == 2, err[-3000:]
    message = error_message(err[err.index("error:") :])
    assert message.startswith(
        "error: reward.fn = 'broken_rewards:wrong_signature' (roll convention) cannot score "
        "the reference answer"
    ), message
    assert message.endswith(
        "raised TypeError: wrong_signature() missing 1 required positional argument: 'reference'"
    ), message
    assert not (tmp_path / "broken").exists()


def test_a_reward_that_fails_on_every_reply_stops_the_run(tmp_path: Path, tiny_model) -> None:
    code, err = cli(
        "train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "broken", *SMALL,
        "reward.fn=broken_rewards:fails_on_model_replies",
    )  # fmt: skip
    assert code == 2, err[-3000:]
    assert "warning: reward.fn = 'broken_rewards:fails_on_model_replies' fails on" in flat(err)
    # the error is the last thing printed, from "error:", wrapped at 80 columns; the first
    # validation (step 0) is where every reply first fails
    message = error_message(err[err.index("error:") :])
    assert message.startswith(
        "error: reward 'broken_rewards:fails_on_model_replies' failed on every sample in "
        "validation (2 samples): fails_on_model_replies('"
    ), message
    assert message.endswith("raised ValueError: cannot parse the reply"), message
    assert err.count("error:") == 1
    assert "Traceback" not in err
    metrics = tmp_path / "broken" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.open()] if metrics.exists() else []
    assert all(r["step"] == 0 for r in rows)  # no step trained on the zeros


def test_eval_with_a_reward_that_fails_on_every_reply_exits_with_the_error(tiny_model) -> None:
    """Not `greedy accuracy 0.000` and exit 0: the first error, exit 2."""
    code, err = cli(
        "eval", "rlvr-math", "--model", "tiny-random", "--n", "2", "rollout.max_new_tokens=4",
        "reward.fn=broken_rewards:fails_on_model_replies",
    )  # fmt: skip
    assert code == 2, err[-3000:]
    message = error_message(err[err.index("error:") :])
    assert message.startswith(
        "error: reward 'broken_rewards:fails_on_model_replies' failed on every sample of "
        "tiny-random in evaluation (2 samples): fails_on_model_replies('"
    ), message


def test_eval_json_counts_a_partial_failure(tiny_model) -> None:
    """The reward raises on the replies to the problems with an odd answer: counted in
    --json (errors and the first message) and warned of, the rest scored."""
    from rollcli.config.loader import load_recipe
    from rollcli.evaluation.rlvr_eval import held_out_problems

    keys = ["rollout.max_new_tokens=4", "reward.fn=broken_rewards:fails_on_odd_answers"]
    cfg, _ = load_recipe("rlvr-math", keys)
    odd = sum(int(p.answer) % 2 for p in held_out_problems(cfg, 6, cfg.seed))
    assert 0 < odd < 6  # the 6 problems' answers, read by hand: some odd, some even
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    args = ["eval", "rlvr-math", "--model", "tiny-random", "--n", "6", "--json", *keys]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["reward_errors"] == odd
    assert summary["reward_error"].endswith("raised ValueError: odd")
    assert f"failed on {odd} of 6 answers of tiny-random" in flat(result.stderr)
