"""`roll reward NAME --input FILE.jsonl`: the scores, the summary, and the errors users see."""

from __future__ import annotations

import json

import pytest
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.rewards.sandbox import detect_isolation

runner = CliRunner()


def write(tmp_path, rows, name="in.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) if isinstance(r, dict) else r for r in rows) + "\n")
    return str(path)


def test_json_output_scores_every_line_like_training(tmp_path):
    path = write(
        tmp_path,
        [
            {"response": "37 + 48 = 85", "answer": "85"},
            {"response": "It is 84.", "answer": "85"},
        ],
    )
    result = runner.invoke(
        app, ["reward", "math", "--input", path, "--json", "--option", "format_weight=0.2"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["score"] for r in data["results"]] == [1.0, 0.2]  # 0.8*correct + 0.2*format
    assert data["summary"]["samples"] == 2 and data["summary"]["mean"] == pytest.approx(0.6)
    assert data["summary"]["metrics"]["correct"] == 0.5


def test_a_json_number_answer_scores_as_training_reads_it(tmp_path):
    """`"answer": 42` is the text "42" to training (rollcli.data.prompts); `roll reward` must
    agree, not score a correct reply 0."""
    from rollcli.data.dataset_prompts import file_prompts
    from rollcli.rollout.prompt_scheduler import sample_fields
    from rollcli.workers.reward import RewardArgs, RewardWorker

    rows = [
        {"prompt": "6 * 7?", "answer": 42, "response": "6 * 7 = 42"},
        {"prompt": "7 / 2?", "answer": 3.5, "response": "7 / 2 = 3.5"},
        {"prompt": "6 * 7?", "answer": 42, "response": "It is 41."},
    ]
    path = write(tmp_path, rows)
    result = runner.invoke(app, ["reward", "math", "--input", path, "--json"])
    assert result.exit_code == 0, result.output
    scores = [r["score"] for r in json.loads(result.stdout)["results"]]
    assert scores[0] == 1.0 and scores[1] == 1.0 and scores[2] < 0.5
    training = [
        {**sample_fields(p), "response": row["response"]}
        for p, row in zip(file_prompts(path), rows, strict=True)
    ]
    assert [r["score"] for r in RewardWorker(RewardArgs("math")).score(training)] == scores


def test_table_shows_scores_errors_and_per_domain_means(tmp_path):
    rows = [
        {"response": "2 + 2 = 4", "answer": "4", "tag": "math"},
        {"response": "hello there", "constraints": [{"type": "lowercase"}], "tag": "general"},
        {"response": "x", "constraints": [{"type": "nope"}], "tag": "general"},
    ]
    result = runner.invoke(
        app,
        [
            "reward",
            "mix",
            "-i",
            write(tmp_path, rows),
            "-o",
            "routes={math: math, general: ifeval}",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "3 samples, mean score 0.6667, 1 with errors" in result.stdout
    assert "reward/math/mean" in result.stdout and "reward/general/mean" in result.stdout
    assert "unknown ifeval constraint type 'nope'" in result.stdout


def test_missing_field_names_the_field_and_the_line(tmp_path):
    path = write(tmp_path, [{"response": "1", "answer": "1"}, "", {"response": "2"}])
    result = runner.invoke(app, ["reward", "math", "--input", path])
    assert result.exit_code == 2
    message = error_message(result.stderr)
    assert "in.jsonl: row 2: missing field 'answer'" in message  # the blank line: no row
    code = runner.invoke(app, ["reward", "code", "--input", path])
    assert "missing field 'tests' or 'answer'" in error_message(code.stderr)
    bad = write(tmp_path, ['{"response": 1', {"response": "x"}], "bad.jsonl")
    message = error_message(runner.invoke(app, ["reward", "math", "-i", bad]).stderr)
    assert "bad.jsonl: not valid JSON at line 1" in message


def test_unknown_reward_and_bad_option_are_one_line_errors(tmp_path):
    path = write(tmp_path, [{"response": "1", "answer": "1"}])
    result = runner.invoke(app, ["reward", "ifevall", "--input", path])
    assert result.exit_code == 2 and "did you mean 'ifeval'" in error_message(result.stderr)
    result = runner.invoke(app, ["reward", "math", "--input", path, "--option", "format_weight"])
    assert result.exit_code == 2 and "is not key=value" in error_message(result.stderr)
    result = runner.invoke(app, ["reward", "math", "--input", path, "--option", "format_weight=3"])
    assert result.exit_code == 2 and "format_weight" in error_message(result.stderr)
    result = runner.invoke(app, ["reward", "math", "--input", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2 and "does not exist" in error_message(result.stderr)


@pytest.mark.skipif(not detect_isolation()["strong"], reason="the sandbox needs namespaces")
def test_code_reward_from_the_cli_says_why(tmp_path):
    tests = ["assert sq(3) == 9", "assert sq(-2) == 4"]
    rows = [
        {"response": "def sq(x): return x * x", "tests": tests},
        {"response": "def sq(x): return x * 3", "tests": tests},
        {"response": "def sq(x) return", "tests": tests},
    ]
    result = runner.invoke(app, ["reward", "code", "-i", write(tmp_path, rows), "--json"])
    data = json.loads(result.stdout)
    assert [r["score"] for r in data["results"]] == [1.0, 0.5, 0.0]
    assert [r["reason"] for r in data["results"]] == ["ok", "assertion", "syntax_error"]
    assert data["summary"]["metrics"]["fail/syntax_error"] == pytest.approx(1 / 3)


def test_every_sample_failing_is_an_error_exit(tmp_path):
    rows = [{"response": "x", "constraints": [{"type": "nope"}]}] * 2
    result = runner.invoke(app, ["reward", "ifeval", "-i", write(tmp_path, rows), "--json"])
    assert result.exit_code == 2  # USER_ERROR_EXIT
    assert json.loads(result.stdout)["summary"]["errors"] == 2  # the results still print
    assert "every sample raised an error in the 'ifeval' reward" in result.stderr
