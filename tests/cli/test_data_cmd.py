"""`roll data sft-from-run | dpo-from-run` through typer's CliRunner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()


def _run_with_samples(runs):
    run = runs / "r"
    (run / "samples").mkdir(parents=True)
    (run / "recipe.yaml").write_text("name: rlvr-math\npipeline: rlvr\n")
    rows = [
        {
            "prompt": "2+3 =",
            "response": "2 + 3 = 5",
            "answer": "5",
            "reward": 1.0,
            "finished": True,
        },
        {"prompt": "2+3 =", "response": "6", "answer": "5", "reward": 0.1, "finished": True},
        {
            "prompt": "1+1 =",
            "response": "1 + 1 = 2",
            "answer": "2",
            "reward": 1.0,
            "finished": True,
        },
    ]
    (run / "samples" / "step-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_sft_and_dpo_files_from_a_run(tmp_path) -> None:
    _run_with_samples(tmp_path)
    out = tmp_path / "sft.jsonl"
    result = runner.invoke(
        app, ["data", "sft-from-run", "r", str(out), "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.stderr
    assert "wrote 2 conversations (2 prompts)" in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["messages"][-1] == {"role": "assistant", "content": "2 + 3 = 5"}
    pairs = tmp_path / "dpo.jsonl"
    result = runner.invoke(
        app, ["data", "dpo-from-run", "r", str(pairs), "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 0 and "wrote 1 preference pairs" in result.stderr
    assert json.loads(pairs.read_text())["rejected"] == "6"


def test_unknown_run_is_one_line(tmp_path) -> None:
    _run_with_samples(tmp_path)
    result = runner.invoke(
        app, ["data", "sft-from-run", "rr", "x.jsonl", "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code != 0 and "no run 'rr'" in result.stderr
