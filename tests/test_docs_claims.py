"""What the docs say the code does, checked against the code (issue: claims nothing the
code does not do). Each claim is read from the page's own sentence and run for real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from error_text import error_message

DOCS = Path(__file__).parents[1] / "docs"


def _paragraph(page: str, starts: str) -> str:
    """The paragraph of docs/`page` that begins with `starts`, on one line."""
    for block in (DOCS / page).read_text().split("\n\n"):
        if block.startswith(starts):
            return " ".join(block.split())
    raise AssertionError(f"docs/{page} has no paragraph starting {starts!r}")


def test_megatron_is_refused_on_this_machine_as_gpu_md_says(tmp_path: Path) -> None:
    text = _paragraph("gpu.md", "**Training strategies.**")
    assert "`megatron` cannot train yet" in text  # not listed as a strategy that trains
    res = subprocess.run(
        [sys.executable, "-m", "rollcli", "train", "rlvr-math", "--model", "tiny-random",
         "train.strategy=megatron", "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    message = error_message(res.stderr)
    assert "megatron cannot train in this build" in message
    assert "--gpus N" not in message  # a GPU would not help: no weight map exists
    assert not any(tmp_path.iterdir())  # nothing started


def test_runs_md_claims_faithful_resume_for_the_pipelines_that_have_it() -> None:
    exact = _paragraph("runs.md", "A resumed rlvr, sft, dpo or distill run repeats")
    assert "the same samples" in exact, exact
    agentic = _paragraph("runs.md", "Agentic runs are exact too.")
    assert "tests/runs/test_resume.py" in agentic  # the claim names the test that checks it


def test_planning_md_names_the_keys_roll_plan_json_prints() -> None:
    import json

    from typer.testing import CliRunner

    from rollcli.cli.app import app

    text = (DOCS / "planning.md").read_text()
    claimed = re.search(r"--json +# (\{[^}]*\})", text).group(1)
    res = CliRunner().invoke(app, ["plan", "rlvr-math", "--json"])
    plan = json.loads(res.stdout)
    assert claimed == "{" + ", ".join(f'"{k}"' for k in plan) + "}"
    for key in plan["devices"][0]:
        assert f"`{key}`" in text
    for key in plan["workers"][0]:
        assert f"`{key}`" in text
    for part in plan["devices"][0]["memory_bytes"]:
        assert f"`{part}`" in text


def test_agentic_md_names_the_agentic_recipes_that_filter_groups() -> None:
    from rollcli.config.loader import load_recipe

    text = _paragraph("agentic.md", "The tool-math recipes set")
    keep = {n: load_recipe(n, [])[0].agentic.keep_top_groups for n in ("agentic-sokoban",
            "agentic-frozenlake", "agentic-tool-math", "agentic-tool-math-agent", "webshop")}  # fmt: skip
    assert keep == {"agentic-sokoban": 0.5, "agentic-frozenlake": 0.5, "agentic-tool-math": 0.5,
                    "agentic-tool-math-agent": 0.5, "webshop": 1.0}  # fmt: skip
    assert "`agentic.keep_top_groups: 0.5`" in text
    assert "`webshop` trains on every group (the default, 1.0)" in text


def test_sft_docs_say_how_its_default_data_differs_from_rlvr_math() -> None:
    from rollcli.config.loader import load_recipe

    text = " ".join((DOCS / "sft-dpo-distill.md").read_text().split())
    sft, rlvr = load_recipe("sft", [])[0].data, load_recipe("rlvr-math", [])[0].data
    assert sft.task == rlvr.task == "chain_sum"
    assert sft.task_args["max_digits"] == 1 and rlvr.task_args["max_digits"] == 2
    assert (sft.val_size, rlvr.val_size) == (64, 256)
    assert "one-digit sums and differences (`rlvr-math`: two-digit)" in text
    assert "64 held out (`rlvr-math` holds out 256)" in text
    assert "same problems and held-out split" not in text


def test_the_readme_has_one_row_per_shipped_recipe_with_its_aliases_and_pipeline() -> None:
    from rollcli.config.catalogue import catalogue

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if re.match(r"\| `[a-z0-9-]+`", line)]
    shipped = {e.name: e for e in catalogue()}
    named = [re.match(r"\| `([a-z0-9-]+)`", row).group(1) for row in rows]
    assert sorted(named) == sorted(shipped)  # each recipe once, none that is not shipped
    for row, name in zip(rows, named, strict=True):
        entry = shipped[name]
        aliases = re.findall(r"`([a-z0-9-]+)`", row.split("|")[1])[1:]
        assert aliases == list(entry.aliases), row
        assert row.split("|")[2].strip() == entry.pipeline, row
