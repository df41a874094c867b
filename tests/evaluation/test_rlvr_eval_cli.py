"""`roll eval` on rlvr recipes through the real CLI (typer's runner, in process, no Ray):
held-out problems answered by the tiny-random model and scored by the recipe's reward."""

from __future__ import annotations

import json

from error_text import flat
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.loader import load_recipe
from rollcli.data.prompt_sets import load_prompt_sets
from rollcli.evaluation.rlvr_eval import held_out_problems
from rollcli.evaluation.stats import mcnemar_exact, pass_at_k, wilson_interval

runner = CliRunner()
FAST = ["rollout.max_new_tokens=6"]


def _eval(*args: str) -> dict:
    result = runner.invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.stderr + str(result.exception)
    return json.loads(result.stdout)


def test_rlvr_eval_reports_accuracy_pass_at_k_and_every_problem() -> None:
    out = _eval("rlvr-math", "--model", "tiny-random", "--n", "8", "--k", "2", *FAST)
    assert out["recipe"] == "rlvr-math" and out["problems"] == 8 and out["k"] == 2
    rows = out["outcomes"]
    # the problems are the run's validation set (the recipe's seed), in order
    cfg, _ = load_recipe("rlvr-math", FAST)
    val = load_prompt_sets(cfg.data.model_copy(update={"val_size": 8}), cfg.seed)[1]
    assert [r["id"] for r in rows] == [p.id for p in val]
    assert [r["answer"] for r in rows] == [p.answer for p in val]
    for r in rows:
        assert set(r) >= {"prompt", "answer", "response", "correct", "score", "samples"}
        assert len(r["samples"]) == 2 and r["samples_correct"] == sum(
            s["correct"] for s in r["samples"]
        )
        assert 1 <= r["response_tokens"] <= 6
    # the summary is recomputed from the rows it prints
    right = sum(r["correct"] for r in rows)
    assert out["accuracy"] == right / 8
    assert out["accuracy_ci95"] == list(wilson_interval(right, 8))
    hits = [r["samples_correct"] for r in rows]
    assert out["pass_at_1"] == sum(pass_at_k(2, c, 1) for c in hits) / 8
    assert out["pass_at_k"] == sum(c > 0 for c in hits) / 8
    assert out["temperature"] == 0.7  # rlvr-math's rollout.temperature


def test_overrides_point_eval_at_another_distribution() -> None:
    out = _eval(
        "rlvr-math", "--model", "tiny-random", "--n", "4", "data.task_args.min_digits=3",
        "data.task_args.max_digits=3", *FAST,
    )  # fmt: skip
    for row in out["outcomes"]:
        numbers = row["prompt"].split(":")[1].strip(" =").replace("-", "+").split("+")
        assert all(len(x.strip()) == 3 for x in numbers), row["prompt"]


def test_compare_pairs_two_models_on_the_same_problems() -> None:
    out = _eval(
        "rlvr-math", "--model", "tiny-random", "--compare", "tiny-random", "--n", "4", *FAST
    )
    first, second = out["models"]
    assert [r["id"] for r in first["outcomes"]] == [r["id"] for r in second["outcomes"]]
    paired = out["paired"]
    b = sum(
        x["correct"] and not y["correct"]
        for x, y in zip(*(m["outcomes"] for m in out["models"]), strict=True)
    )
    assert paired["items"] == 4 and paired["only_first"] == b
    assert paired["p_value"] == mcnemar_exact(paired["only_first"], paired["only_second"])


def test_terminal_output_shows_interval_and_an_example() -> None:
    result = runner.invoke(app, ["eval", "rlvr-math", "--model", "tiny-random", "--n", "2", *FAST])
    assert result.exit_code == 0, result.stderr + str(result.exception)
    assert "greedy accuracy" in result.stdout and "95% CI" in result.stdout
    assert "example problem" in result.stdout


def test_eval_set_is_training_validation_set() -> None:
    cfg, _ = load_recipe("rlvr-math", [])
    assert (
        held_out_problems(cfg, cfg.data.val_size, cfg.seed)
        == load_prompt_sets(cfg.data, cfg.seed)[1]
    )


def test_bad_flags_are_one_line_errors() -> None:
    cases = [
        (["--model", "random"], "a baseline for environments, with no model"),
        (["--model", "expert"], "an rlvr recipe needs a model"),
        (["--temperature", "0.5"], "--temperature applies to the --k samples"),
        (["--k", "0"], "--k 0"),
        (["--n", "300", "data.task_args.min_digits=1", "data.task_args.max_digits=1"], "only 200"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["eval", "rlvr-math", *args])
        assert result.exit_code == 2, (args, result.stdout, result.exception)
        assert message in flat(result.stderr), (args, result.stderr)
