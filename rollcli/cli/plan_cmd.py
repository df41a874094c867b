"""`roll plan RECIPE|FILE [--model M] [--gpus N] [--nodes K] [--gpu-kind K | --gpu-mem G]
[--host-mem G] [--json]`.

A dry run of device mapping and memory: which device runs which role, each device's
memory at its peak phase, whether it fits and what to change. Exits 1 when it does not fit. Imports neither torch nor
Ray; `roll train` runs the same plan (rollcli.planning.from_recipe) before it starts.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console

from rollcli.cli.errors import print_note, print_warning, user_errors

out = Console()


def plan(
    recipe: str = typer.Argument(
        ..., help="Recipe name, unique prefix (rlvr → rlvr-math) or YAML file."
    ),
    overrides: list[str] = typer.Argument(
        None, help="Overrides as key.path=value, e.g. devices.actor_train.zero_stage=3."
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Registry name (qwen2.5-7b, ...), HF folder or run id (its newest checkpoint).",
    ),
    gpus: int = typer.Option(
        None, "--gpus", help="GPUs in the cluster (default: resources.gpus; 0 = CPU)."
    ),
    nodes: int = typer.Option(None, "--nodes", help="Nodes the GPUs are spread over."),
    gpu_kind: str = typer.Option(
        None, "--gpu-kind", help="h100-80g, h200, a100-80g, a100-40g, l40s, 4090, ..."
    ),
    gpu_mem: float = typer.Option(None, "--gpu-mem", help="GiB per GPU (instead of --gpu-kind)."),
    host_mem: float = typer.Option(
        None,
        "--host-mem",
        help="GiB of RAM per node, which holds offloaded states (default: "
        "devices.host_mem_gib; a CPU plan: this machine's).",
    ),
    engine: str = typer.Option(
        None, "--engine", help="Plan this rollout engine (hf, vllm, sglang) instead of auto's."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Plan devices and memory for a recipe (dry run): fits or not, and what to change.

    Exit status: 0 when the plan fits, 1 when it does not (the advice says what to change),
    2 for a bad recipe, key or flag; so a script can test `roll plan ... && roll train ...`.
    """
    from rollcli.cli.recipe_summary import summary_lines
    from rollcli.config.loader import load_recipe
    from rollcli.config.recipe_scale import scale_note
    from rollcli.launch.prelaunch import check_recipe, with_run_model
    from rollcli.models.spec import active_param_count, param_count
    from rollcli.planning.auto_strategy import resolve_auto
    from rollcli.planning.from_recipe import auto_lines, plan_recipe
    from rollcli.planning.model_spec import model_spec, moe_line

    flags = {
        "model": model,
        "resources.gpus": gpus,
        "devices.nodes": nodes,
        "devices.host_mem_gib": host_mem,
        "rollout.engine": engine,
    }
    with user_errors(debug):
        if gpu_kind is not None and gpu_mem is not None:
            from rollcli.config.errors import ConfigError

            raise ConfigError("give --gpu-kind or --gpu-mem, not both")
        cfg, _ = load_recipe(recipe, overrides or [], flags)
        cfg = with_run_model(cfg)  # a run id: its checkpoint
        # what `roll train` refuses whatever the machine, in its words; notes: the hub
        # datasets it would download
        notes = check_recipe(cfg, print_warning)
        choice = resolve_auto(cfg, gpu_kind=gpu_kind, gpu_mem_gib=gpu_mem)
        cfg = choice.cfg
        result = plan_recipe(cfg, gpu_kind=gpu_kind, gpu_mem_gib=gpu_mem)
        spec = model_spec(cfg.model)
    if as_json:
        auto = [*choice.lines, *auto_lines(cfg)]
        recipe_lines = summary_lines(cfg)
        typer.echo(
            json.dumps(
                {
                    **result.to_json(),
                    "params": {"total": param_count(spec), "active": active_param_count(spec)},
                    "recipe": recipe_lines,
                    "auto": auto,
                    "notes": notes,
                },
                indent=2,
            )
        )
        raise typer.Exit(0 if result.fits else 1)
    from rollcli.planning.render import render_lines, render_plan

    size = [line for line in [moe_line(spec)] if line]
    out.print(render_lines([*summary_lines(cfg), *size, *choice.lines, *auto_lines(cfg)]))
    out.print(render_plan(result))
    warmup = getattr(cfg, "warmup", None)
    if warmup is not None:  # the sft sub-run fits where RL's trainer does (one model, no engine)
        out.print(
            f"warm-up first: sft on {warmup.episodes} {warmup.policy} episodes, {warmup.steps} "
            f"steps of {warmup.batch_size} (RUN/warmup); RL starts from its checkpoint"
        )
    if result.mode != "cpu" and not gpu_kind and not gpu_mem and not cfg.devices.gpu_mem_gib:
        out.print(
            f"[dim]GPU memory of devices.gpu_kind={cfg.devices.gpu_kind} "
            "(--gpu-kind or --gpu-mem for yours)[/]"
        )
    scaled = scale_note(recipe, overrides or [], flags)
    for note in [scaled] if scaled else []:
        print_note(note)
    for note in notes:
        print_note(note)
    if not result.fits:
        raise typer.Exit(1)
