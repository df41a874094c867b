"""A recipe's two scales through the real CLI: the alias `rlvr` on `--gpus 8` plans and
dry-runs the paper's RLVR mix (rlvr-paper), on a CPU the demo's rlvr-math as written; a
recipe named in full runs as written on any devices."""

from __future__ import annotations

import json

import pytest
import yaml
from error_text import flat
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.catalogue import find_recipe
from rollcli.config.loader import load_recipe
from rollcli.config.recipe_scale import requested_gpus, scale_choice

runner = CliRunner()


def test_the_alias_picks_the_at_scale_recipe_only_when_gpus_are_asked_for() -> None:
    name, text = find_recipe("rlvr")
    assert name == "rlvr-math"
    assert scale_choice("rlvr", name, text, 8).name == "rlvr-paper"
    assert scale_choice("rlvr", name, text, 0).name == "rlvr-math"
    assert scale_choice("rlvr-math", name, text, 8) is None  # named in full
    assert scale_choice("rlvr-m", name, text, 8) is None  # a prefix names the recipe itself
    assert requested_gpus(["resources.gpus=4"], {"resources.gpus": None}) == 4
    assert requested_gpus(["resources.gpus=4"], {"resources.gpus": 2}) == 4  # as applied
    assert requested_gpus([], {}) == 0


def test_load_recipe_follows_the_devices() -> None:
    cpu, source = load_recipe("rlvr")
    assert (source, cpu.name, cpu.model) == ("rlvr-math", "rlvr-math", "smollm2-135m")
    gpu, source = load_recipe("rlvr", [], {"resources.gpus": 8})
    assert (source, gpu.name, gpu.model) == ("rlvr-paper", "rlvr-paper", "qwen2.5-7b-base")
    named, source = load_recipe("rlvr-math", [], {"resources.gpus": 8})
    assert (source, named.rollout.max_new_tokens) == ("rlvr-math", 32)
    by_override, source = load_recipe("math", ["resources.gpus=8"])
    assert source == "rlvr-paper"


def test_the_cpu_recipe_is_as_written_apart_from_its_pointer() -> None:
    """rlvr-math's resolved settings are what its file says (the fingerprint runs it)."""
    _, text = find_recipe("rlvr-math")
    raw = yaml.safe_load(text)
    assert raw["at_scale"] == "rlvr-paper" and raw["rollout"]["max_new_tokens"] == 32


def test_plan_rlvr_on_8_gpus_shows_the_papers_mix_and_fits() -> None:
    res = runner.invoke(app, ["plan", "rlvr", "--model", "qwen2.5-7b", "--gpus", "8"])
    assert res.exit_code == 0, res.output
    out = flat(res.output)
    assert "trains qwen2.5-7b for 500 steps at lr 1e-06 (rlvr-paper)" in out
    assert "math_rule 40%: zwhe99/DeepMath-103K, 5,000 sampled by difficulty" in out
    assert "code_sandbox 30%: KodCode/KodCode-Light-RL-10K, 2,000 sampled by gpt_difficulty" in out
    for general in ("virtuoussy/Multi-subject-RLVR", "nvidia/Nemotron-CrossThink"):
        assert general in out
    assert "ifeval 10%: allenai/RLVR-IFeval" in out
    assert "batch: 64 prompts x 8 samples = 512 a step" in out
    assert "responses up to 4096" in out and "loss: ppo on reinforce advantages" in out
    assert "`rlvr` on 8 GPUs runs the paper's settings at scale" in out
    assert "fits: peak" in out


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        ("qwen2.5-7b-base", "h100-80g"),
        ("qwen2.5-7b-base", "h200"),
        ("qwen3-30b-a3b-base", "h100-80g"),
        ("qwen3-30b-a3b-base", "h200"),
    ],
)
def test_the_papers_models_fit_8_gpus(model: str, kind: str) -> None:
    args = ["plan", "rlvr", "--model", model, "--gpus", "8", "--gpu-kind", kind, "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["fits"] and plan["recipe"][0].startswith(f"trains {model} for 500 steps")


def test_dry_run_on_a_cpu_keeps_the_demo_and_says_so() -> None:
    res = runner.invoke(app, ["train", "rlvr", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(res.stdout)["rollout"]["max_new_tokens"] == 32
    err = flat(res.stderr)
    assert "# recipe rlvr-math, resolved" in err
    assert "`rlvr` on a CPU runs the CPU recipe; with --gpus N it runs rlvr-paper" in err


def test_dry_run_with_gpus_resolves_the_paper_recipe() -> None:
    res = runner.invoke(app, ["train", "rlvr", "--model", "qwen2.5-7b", "--gpus", "8", "--dry-run"])
    assert res.exit_code == 0, res.output
    resolved = yaml.safe_load(res.stdout)
    assert resolved["name"] == "rlvr-paper" and resolved["rollout"]["batch_size"] == 512
    mix = resolved["data"]["mix"]
    shares = {name: domain["ratio"] for name, domain in mix.items()}
    assert shares == {
        "math_rule": 0.4, "code_sandbox": 0.3, "llm_judge": 0.1, "crossthinkqa": 0.1, "ifeval": 0.1
    }  # fmt: skip


def test_the_7b_dry_run_prints_what_applies_within_80_columns() -> None:
    """The paper's mix is five datasets: the printed recipe names no generator `task:`
    (the flat data section printed `task: chain_sum`, so the 7B run seemed to train
    two-digit sums), and every line fits 80 columns (its description reached 84)."""
    args = ["train", "rlvr", "--model", "qwen2.5-7b", "--gpus", "8", "--dry-run"]
    res = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "task:" not in res.stdout and "chain_sum" not in res.stdout
    resolved = yaml.safe_load(res.stdout)
    assert "critic" not in resolved and "reference" not in resolved["devices"]
    lines = [*res.stdout.splitlines(), *res.stderr.splitlines()]
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)


def test_a_dataset_replacing_the_generator_prints_no_task(tmp_path) -> None:
    data = tmp_path / "sums.jsonl"
    rows = [{"prompt": f"{n}+{n}?", "answer": str(2 * n)} for n in range(8)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["train", "rlvr-math", f"data.path={data}", "data.val_size=2", "--model", "tiny-random"]
    res = runner.invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    shown = yaml.safe_load(res.stdout)["data"]
    assert shown["path"] == str(data) and "task" not in shown and "task_args" not in shown


def test_a_recipe_named_in_full_on_gpus_names_its_at_scale_form() -> None:
    """`roll train webshop --gpus 8` runs the 12-step CPU recipe as written: a note says so
    and names webshop-paper, with the command that runs it (which `roll train` accepts)."""
    res = runner.invoke(app, ["train", "webshop", "--gpus", "8", "--dry-run"])
    assert res.exit_code == 0, res.output
    err = flat(res.stderr)
    assert (
        "note: recipe webshop on 8 GPUs runs as written (its CPU settings); the paper's "
        "settings at scale are webshop-paper: `roll train webshop-paper --gpus 8`"
    ) in err
    advised = runner.invoke(app, ["train", "webshop-paper", "--gpus", "8", "--dry-run"])
    assert advised.exit_code == 0, advised.output
    assert "runs as written" not in advised.stderr  # the at-scale recipe itself: no note
    cpu = runner.invoke(app, ["train", "webshop", "--dry-run"])  # on a CPU: as it should
    assert cpu.exit_code == 0 and "webshop-paper" not in cpu.stderr


@pytest.mark.parametrize(
    "recipe", ["rlvr-gsm8k", "agentic-sokoban", "webshop", "dpo", "sft", "distill-on-policy"]
)
@pytest.mark.parametrize("gpus", ["0", "8"])
def test_every_pipelines_dry_run_fits_80_columns(recipe: str, gpus: str) -> None:
    """The resolved recipe, the summary, the notes and any refusal (distillation on GPUs)."""
    res = runner.invoke(app, ["train", recipe, "--gpus", gpus, "--dry-run"], env={"COLUMNS": "80"})
    assert res.exit_code in (0, 2), res.output
    lines = [*res.stdout.splitlines(), *res.stderr.splitlines()]
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
