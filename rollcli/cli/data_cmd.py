"""`roll data preview RECIPE [key=value ...] [--n 3] [--json]`: the first training items as
the model sees them; `roll data sft-from-run | dpo-from-run RUN_ID OUT.jsonl`: rejection
sampling, a run's verified samples turned into training data for the sft or dpo pipeline;
`roll data episodes ENV|RECIPE --policy expert|random --n N --out OUT.jsonl`: warm-up
conversations played by a scripted policy in an agentic recipe's chat format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from rollcli.cli.errors import err_console, user_errors
from rollcli.cli.out_file import check_writable
from rollcli.cli.progress import progress
from rollcli.cli.run_arg import RUNS_DIR, find_run
from rollcli.config.pipeline_spec import spec_of

out = Console()
app = typer.Typer(
    help="See a recipe's data as the model does; build training data from runs and envs.",
    no_args_is_help=True,
)

MIN_REWARD = typer.Option(
    1.0, "--min-reward", help="A sample at or above this reward counts as verified."
)
UNFINISHED = typer.Option(
    False, "--include-unfinished", help="Also use samples cut off by max_new_tokens."
)


@app.command("preview")
def preview(
    recipe: str = typer.Argument(..., help="Recipe name, unique prefix or YAML file."),
    overrides: list[str] = typer.Argument(
        None, help="Overrides as key.path=value, e.g. data.prompt_key=question."
    ),
    model: str = typer.Option(
        None, "--model", "-m", help="The model whose tokenizer and chat template to use."
    ),
    n: int = typer.Option(3, "--n", min=1, help="Training items to show."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="One JSON object a line: prompt, prompt_tokens, answer, reward (and reward_error).",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """The first training items as the model sees them: the prompt with the chat template
    (special tokens shown), its tokens, the parsed answer and the reward that answer gets."""
    import json

    from rollcli.config.loader import load_recipe

    with user_errors(debug):
        cfg, _ = load_recipe(recipe, overrides or [], {"model": model})
        from rollcli.cli.errors import print_warning
        from rollcli.launch.data_check import check_data
        from rollcli.launch.data_preview import preview_rows
        from rollcli.launch.plugin_check import check_plugins
        from rollcli.launch.reward_check import check_reward_calls

        check_plugins(cfg)  # the reward that scores the items, as `roll train` checks it
        if not check_data(cfg):  # a bad column is one line naming the key, not a traceback
            for warning in check_reward_calls(cfg):  # a reward that cannot score: refused
                print_warning(warning)
        rows = preview_rows(cfg, n)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False))
        return
    from rich.rule import Rule

    for i, row in enumerate(rows, 1):
        reward = "-" if row["reward"] is None else f"{row['reward']:.2f}"
        if row.get("reward_error"):
            reward = f"error: {row['reward_error']}"
        head = f"item {i} ({row['id']}): {row['prompt_tokens']} prompt tokens, reward {reward}"
        out.print(Rule(head, align="left"), markup=False)
        out.print(row["prompt"], markup=False, highlight=False, end="")
        for key in ("answer", "response", "rejected"):
            if row.get(key) is not None:
                out.print(f"[{key}] {row[key]}", markup=False, highlight=False)


@app.command("sft-from-run")
def sft_from_run(
    run_id: str = typer.Argument(..., help="The run whose samples to read."),
    out: Path = typer.Argument(..., help="The jsonl file to write (conversations)."),
    runs_dir: Path = RUNS_DIR,
    min_reward: float = MIN_REWARD,
    per_prompt: int = typer.Option(
        None,
        "--per-prompt",
        min=1,
        help="At most N distinct responses per prompt (default: all).",
    ),
    include_unfinished: bool = UNFINISHED,
) -> None:
    """Verified samples as SFT conversations: `roll train sft data.path=OUT`."""
    from rollcli.data.from_run import sft_rows

    rows = _write_from_run(
        sft_rows, run_id, out, runs_dir, min_reward, per_prompt, include_unfinished
    )
    prompts = len({r["messages"][-2]["content"] for r in rows})
    err_console.print(f"wrote {len(rows)} conversations ({prompts} prompts) to {out}", markup=False)


@app.command("dpo-from-run")
def dpo_from_run(
    run_id: str = typer.Argument(..., help="The run whose samples to read."),
    out: Path = typer.Argument(..., help="The jsonl file to write (preference pairs)."),
    runs_dir: Path = RUNS_DIR,
    min_reward: float = MIN_REWARD,
    per_prompt: int = typer.Option(1, "--per-prompt", min=1, help="At most N pairs per prompt."),
    include_unfinished: bool = UNFINISHED,
) -> None:
    """Verified against failed samples of the same prompt as DPO pairs."""
    from rollcli.data.from_run import dpo_rows

    rows = _write_from_run(
        dpo_rows, run_id, out, runs_dir, min_reward, per_prompt, include_unfinished
    )
    err_console.print(f"wrote {len(rows)} preference pairs to {out}", markup=False)


def _write_from_run(
    rows_of: Callable[..., list[dict[str, Any]]],
    run_id: str,
    out: Path,
    runs_dir: Path,
    min_reward: float,
    per_prompt: int | None,
    include_unfinished: bool,
) -> list[dict[str, Any]]:
    """`rows_of` (`data.from_run.sft_rows` or `dpo_rows`) over run `run_id`'s samples,
    written to `out` (checked writable first); a user error is one red line."""
    from rollcli.data.from_run import write_jsonl

    check_writable(out, makes_folders=True)
    with user_errors():
        rows = rows_of(
            find_run(run_id, runs_dir),
            min_reward=min_reward,
            per_prompt=per_prompt,
            include_unfinished=include_unfinished,
        )
        write_jsonl(rows, out)
    return rows


@app.command("episodes")
def episodes(
    target: str = typer.Argument(
        ...,
        help="An environment (frozenlake, sokoban, webshop, tool) or an agentic recipe / YAML file.",
    ),
    overrides: list[str] = typer.Argument(
        None, help="Recipe overrides as key.path=value, e.g. agentic.env_kwargs.size=4."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The jsonl file to write (conversations)."),
    policy: str = typer.Option(
        "expert", "--policy", help="expert (the env's solver) or random (random legal moves)."
    ),
    n: int = typer.Option(200, "--n", min=1, help="Episodes to play."),
    seed: int = typer.Option(
        0, "--seed", min=0, help="The first env seed (below agentic.val_seed)."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Episodes of a scripted policy in the recipe's RL chat format, as SFT conversations:
    `roll train sft data.path=OUT`."""
    from rollcli.cli.eval_target import ENV_RECIPES
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe
    from rollcli.config.recipe import AgenticRecipe
    from rollcli.config.warmup_section import POLICIES

    with user_errors(debug):
        if policy not in POLICIES:  # checked before the seconds of imports that playing takes
            raise ConfigError(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
        cfg, source = load_recipe(ENV_RECIPES.get(target, target), overrides or [])
        if not spec_of(cfg).plays_episodes:
            raise ConfigError(
                f"{source} is a {cfg.pipeline} recipe; roll data episodes plays environments: "
                "give frozenlake, sokoban or an agentic recipe"
            )
        assert isinstance(cfg, AgenticRecipe)  # the spec's episodes pipeline
        from rollcli.launch.plugin_check import check_plugins

        check_plugins(cfg)  # the envs it plays, as `roll train` checks them
        check_writable(out, makes_folders=True)
        from rollcli.launch.scripted_episodes import write_episodes

        with progress(err_console) as report:
            played = write_episodes(
                cfg, out, policy=policy, n=n, seed=seed,
                on_progress=lambda done, total: report("episodes", done, total),
            )  # fmt: skip
    rows = [ep for ep in played if ep.trainable]
    wins = sum(ep.success for ep in played)
    err_console.print(
        f"wrote {len(rows)} {policy} episodes of {cfg.agentic.env} ({source}, seeds {seed}-"
        f"{seed + n - 1}) to {out}: {wins} solved, "
        f"{sum(ep.turns for ep in played) / max(len(played), 1):.1f} moves on average",
        highlight=False,
        markup=False,
    )
