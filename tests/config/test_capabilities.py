"""What a recipe may do is answered once (`rollcli.config.capabilities`), when it loads:
`roll train --dry-run`, `roll plan` and `roll train`'s pre-launch check give the same verdict
and the same line on a matrix of recipes x `--gpus` x `train.strategy` (x `rollout.engine`).

`roll plan` exiting 1 (the plan does not fit memory) is not a refusal: the recipe is one
this build runs, on bigger GPUs or with the advice applied; `roll train` and `--dry-run`
(which makes every check `roll train` makes before it starts) then refuse with the same
line, the advice.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.capabilities import capability_error, capability_table
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe

runner = CliRunner()

# (recipe, extra arguments, the verdicts its cells reach): at least one shipped recipe per
# pipeline, the engines that matter, and one model that does not fit its GPUs with plain hf
# on any of these GPU counts (plan exits 1)
CASES = [
    ("rlvr-math", [], {"fits", "refused"}),
    ("rlvr-math", ["rollout.engine=vllm"], {"fits", "refused"}),
    ("rlvr-math", ["--model", "qwen2.5-7b"], {"does not fit", "refused"}),
    ("agentic-frozenlake", [], {"fits", "refused"}),
    ("agentic-sokoban", ["rollout.engine=vllm"], {"fits", "refused"}),
    ("dpo", [], {"fits", "refused"}),
    ("sft", [], {"fits", "refused"}),
    ("distill", [], {"fits", "refused"}),
]
PIPELINE = {
    "rlvr-math": "rlvr",
    "agentic-frozenlake": "agentic",
    "agentic-sokoban": "agentic",
    "dpo": "dpo",
    "sft": "sft",
    "distill": "distill",
}
GPUS = (0, 1, 8)
STRATEGIES = ("hf", "deepspeed", "megatron")


def _expected_refused(pipeline: str, gpus: int, strategy: str) -> bool:
    """Worked out by hand from docs/gpu.md: GPUs and deepspeed are the RL pipeline's (rlvr
    and agentic), megatron no one's."""
    rl = pipeline in ("rlvr", "agentic")
    return (gpus > 0 and not rl) or strategy == "megatron" or (strategy == "deepspeed" and not rl)


def _split(extra: list[str]) -> tuple[list[str], list[str], dict[str, str]]:
    """CLI arguments, key=value overrides, and the flags they set (for load_recipe)."""
    flags = {"model": extra[1]} if extra[:1] == ["--model"] else {}
    overrides = [e for e in extra if "=" in e]
    return extra, overrides, flags


def _cli_line(res) -> str:  # noqa: ANN001
    """The one `error:` message of a refused command, unwrapped."""
    return error_message(res.stderr)[len("error: ") :]


@pytest.fixture
def capable_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher's probes of this machine answer as on a GPU host with every backend:
    8 CUDA GPUs, vllm / deepspeed / sglang installed (hardware is a boundary we do not own);
    what remains is what the recipe asks of the build, and whether its plan fits."""
    import torch

    from rollcli.config import engines as infer_engines
    from rollcli.launch import gpu_support
    from rollcli.planning import backends

    monkeypatch.setattr(gpu_support, "visible_gpu_count", lambda env=None: 8)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(infer_engines, "vllm_available", lambda: True)
    monkeypatch.setattr(backends, "is_installed", lambda backend: True)


def _launcher_verdict(recipe: str, overrides: list[str], flags: dict, gpus: int) -> tuple:
    """What `roll train` does before it starts anything: load the recipe, then the
    launcher's pre-launch check (`launch._check_supported`), without launching."""
    from rollcli.launch.launch import _check_supported

    try:
        cfg, _ = load_recipe(recipe, overrides, {**flags, "resources.gpus": gpus})
    except ConfigError as err:
        return ("refused", str(err))
    try:
        _check_supported(cfg)
    except ConfigError as err:
        assert "does not fit" in str(err), str(err)  # nothing else may refuse here
        return ("does not fit", str(err))
    return ("fits",)


@pytest.mark.parametrize(("recipe", "extra", "verdicts"), CASES)
def test_dry_run_plan_and_train_give_the_same_verdict(
    capable_machine: None, tmp_path: Path, recipe: str, extra: list[str], verdicts: set[str]
) -> None:
    seen: set[str] = set()
    for gpus, strategy in itertools.product(GPUS, STRATEGIES):
        cli_args, overrides, flags = _split([*extra, f"train.strategy={strategy}"])
        cell = f"{recipe} {' '.join(cli_args)} --gpus {gpus}"
        common = [*cli_args, "--gpus", str(gpus)]
        dry = runner.invoke(
            app, ["train", recipe, *common, "--dry-run", "--runs-dir", str(tmp_path)]
        )
        plan = runner.invoke(app, ["plan", recipe, *common, "--json"])
        launcher = _launcher_verdict(recipe, overrides, flags, gpus)

        if _expected_refused(PIPELINE[recipe], gpus, strategy):
            assert dry.exit_code == 2 and plan.exit_code == 2, cell
            line = _cli_line(dry)
            assert _cli_line(plan) == line, cell
            assert launcher == ("refused", line), cell
            seen.add("refused")
            continue
        assert plan.exit_code in (0, 1), f"{cell}: {plan.stderr}"
        if plan.exit_code == 1:
            assert dry.exit_code == 2, f"{cell}: {dry.stderr}"
            assert launcher == ("does not fit", _cli_line(dry)), cell
            seen.add("does not fit")
            continue
        assert dry.exit_code == 0, f"{cell}: {dry.stderr}"
        assert launcher == ("fits",), cell
        seen.add("fits")
    assert seen == verdicts  # the matrix reaches every verdict across the cases
    assert not any(tmp_path.iterdir())  # --dry-run started nothing


@pytest.mark.parametrize(
    ("recipe", "overrides", "gpus", "expected"),
    [
        ("sft", [], 1, "--gpus 1: the sft pipeline runs on CPU only in this build"),
        ("rlvr-math", ["train.strategy=megatron"], 0, "megatron cannot train in this build"),
        ("dpo", ["train.strategy=deepspeed"], 0, "wired into the rlvr and agentic pipelines only"),
        (
            "rlvr-math-lora",
            ["train.strategy=deepspeed"],
            0,
            "train.lora runs on train.strategy=hf",
        ),
        (
            "rlvr-math",
            ["devices.actor_train.zero_stage=2"],
            0,
            "devices.actor_train.zero_stage=2 needs strategy deepspeed, not auto",
        ),
        (
            "rlvr-math",
            ["devices.critic.offload_optimizer=true"],
            0,
            "devices.critic.offload_optimizer needs strategy deepspeed",
        ),
        ("sft", ["train.num_workers=2"], 0, "data-parallel training is wired"),
        (
            "agentic-sokoban",
            ["train.num_workers=3"],
            0,
            "agentic.group_size x agentic.groups_per_step = 64 does not split evenly",
        ),
        ("sft", ["rollout.max_staleness=1"], 0, "async rollout is wired into"),
        ("sft", ["rollout.engine=vllm"], 0, "remove rollout.engine"),
        ("rlvr-math", ["rollout.engine=sglang"], 0, "sglang runs on GPUs only"),
        ("rlvr-math", ["rollout.partial=true"], 0, "needs rollout.max_staleness >= 1"),
        (
            "rlvr-math",
            ["rollout.partial=true", "rollout.max_staleness=2", "rollout.engine=vllm"],
            0,
            "the vllm engine cannot continue paused samples",
        ),
        (
            "agentic-frozenlake",
            ["rollout.partial=true", "rollout.max_staleness=2"],
            0,
            "the agentic pipeline cannot pause samples across steps",
        ),
    ],
)
def test_each_refusal_is_one_line_naming_the_key(recipe, overrides, gpus, expected) -> None:
    with pytest.raises(ConfigError, match=expected) as err:
        load_recipe(recipe, overrides, {"resources.gpus": gpus})
    assert "\n" not in str(err.value)


def test_what_each_pipeline_can_do_is_accepted() -> None:
    for recipe, overrides, gpus in [
        ("rlvr-math", ["train.strategy=deepspeed", "devices.actor_train.zero_stage=3"], 8),
        ("rlvr-math", ["rollout.engine=sglang", "rollout.max_staleness=1"], 8),
        ("rlvr-math", ["train.num_workers=2", "rollout.max_staleness=1"], 0),
        ("rlvr-math", ["rollout.partial=true", "rollout.max_staleness=1"], 0),
        ("rlvr-math", ["rollout.continuous_batching=true"], 0),
        ("agentic-sokoban", ["rollout.engine=vllm"], 0),
        ("agentic-sokoban", ["train.num_workers=2", "algorithm.name=ppo"], 0),
        ("agentic-sokoban", ["rollout.max_staleness=1", "algorithm.off_policy.correction=tis"], 0),
        ("agentic-frozenlake", ["train.strategy=deepspeed"], 1),
        ("distill", ["train.lora.r=8"], 0),
    ]:
        cfg, _ = load_recipe(recipe, overrides, {"resources.gpus": gpus})
        assert capability_error(cfg) is None


def test_docs_show_the_table_the_code_checks() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "gpu.md").read_text(encoding="utf-8")
    assert capability_table() in doc, (
        "docs/gpu.md's capability table is out of date; paste "
        "rollcli.config.capabilities.capability_table() into it"
    )
