"""`roll runs scan`: the reward-hacking scan of a run's samples, counted by hand."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.evaluation.reward_scan import flags, new_numbers
from rollcli.runs.run_dir import RunDir

runner = CliRunner()
PROMPT = "State the final answer to the following arithmetic problem: 7 - 2 - 8 ="


def _row(response: str, correct: float, finished: bool = True, reward: float | None = None) -> dict:
    return {"prompt": PROMPT, "response": response, "answer": "-3", "correct": correct,
            "reward": correct if reward is None else reward, "finished": finished}  # fmt: skip


def test_doctests() -> None:
    import doctest

    import rollcli.evaluation.reward_scan as module

    assert doctest.testmod(module).failed == 0


def test_new_numbers_leaves_out_the_operands_and_keeps_a_new_sign() -> None:
    assert new_numbers(PROMPT, "7 - 2 = 5, 5 - 8 = -3. The answer is -3.") == ["5", "-3"]
    assert new_numbers(PROMPT, "It is -2, 8, 1, 0 or -3") == ["-2", "1", "0", "-3"]
    assert new_numbers(PROMPT, "The answer is 7.") == []


def test_flags_a_cut_off_reply_and_a_list_of_guesses_not_a_worked_answer() -> None:
    assert flags(_row("7 - 2 = 5, 5 - 8 = -3. The answer is -3.", 1)) == []
    assert flags(_row("It is 1, 0 or -3", 1)) == ["many_numbers"]
    assert flags(_row("It is 1, 0 or -3", 1), many=4) == []
    assert flags(_row("This theorem of 3 and", 0, finished=False)) == ["truncated"]
    # the hack math-verify paid before the reward read the last `=`: the problem restated
    assert flags(_row("The final answer is 7 - 2 - 8 = 4.", 1)) == ["last_number_wrong"]
    # wrong, so not a verifier's mistake
    assert flags(_row("The final answer is 4.", 0)) == []


def test_flags_a_reply_paid_by_format_credit_alone() -> None:
    """The math reward's format credit (format_weight 0.1) on a wrong reply: paid, not
    correct; cut at the token limit it is both flags."""
    assert flags(_row("7 - 2 = 5, 5 - 8 = 4", 0, reward=0.1)) == ["format_only"]
    assert flags(_row("7 - 2 - 8 = 5 - 8 = 4", 0, finished=False, reward=0.1)) == [
        "truncated",
        "format_only",
    ]


def test_roll_runs_scan_counts_rewarded_and_unrewarded_per_step(tmp_path) -> None:
    run = RunDir.create(tmp_path, "r", "name: rlvr-math\n")
    run.write_samples(1, [
        _row("The answer is -3.", 1),
        _row("We get 9 then 4, so 1, 0 or -3", 1),  # 5 new numbers, rewarded: suspect
        _row("The answer is 1.", 0),
    ])  # fmt: skip
    run.write_samples(2, [
        _row("7 - 2 = 5 and then -3", 1, finished=False),  # rewarded while cut off
        _row("Maybe 1, 2, 3, 4", 0, finished=False),  # both flags, unrewarded
        _row("5 - 8 = 4", 0, finished=False, reward=0.1),  # format credit for a cut reply
    ])  # fmt: skip
    result = runner.invoke(app, ["runs", "scan", "r", "--runs-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["rewarded"] == {
        "samples": 4, "truncated": 2, "format_only": 1, "many_numbers": 1, "last_number_wrong": 0
    }  # fmt: skip
    assert out["unrewarded"] == {
        "samples": 2, "truncated": 1, "format_only": 0, "many_numbers": 1, "last_number_wrong": 0
    }  # fmt: skip
    assert out["per_step"] == {
        "1": {"samples": 2, "truncated": 0, "format_only": 0, "many_numbers": 1,
              "last_number_wrong": 0},
        "2": {"samples": 2, "truncated": 2, "format_only": 1, "many_numbers": 0,
              "last_number_wrong": 0},
    }  # fmt: skip
    assert [e["step"] for e in out["examples"]] == [1, 2, 2]
    table = runner.invoke(
        app, ["runs", "scan", "r", "--runs-dir", str(tmp_path)], env={"COLUMNS": "80"}
    )
    assert table.exit_code == 0 and "2/4 (50.0%)" in table.stdout


def test_roll_runs_scan_of_a_run_without_samples_says_why(tmp_path) -> None:
    RunDir.create(tmp_path, "empty", "name: rlvr-math\n")
    result = runner.invoke(app, ["runs", "scan", "empty", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 2 and "saved no samples" in result.stderr
