"""`roll eval ENV|RECIPE --model M [--compare M2] [--n N] [--seed S] [--k K]
[--temperature T] [--json] [key=value ...]`.

An environment or agentic recipe plays episodes (success rate with its Wilson interval,
per-episode outcomes); an rlvr recipe answers its held-out problems (greedy accuracy with
its interval, pass@k from sampled answers, per-problem outcomes). `--compare` evaluates a
second model on the same seeds or problems and adds the paired table (exact McNemar)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from rollcli.cli.errors import err_console, user_errors
from rollcli.cli.progress import progress
from rollcli.cli.run_arg import RUNS_DIR
from rollcli.config.pipeline_spec import spec_of

out = Console()
ENV_EPISODES = 200  # default --n for environments: a 95% interval of about ±0.07


def eval_cmd(
    target: str = typer.Argument(
        ...,
        help="An environment (sokoban, frozenlake, webshop, tool), an agentic recipe, or an rlvr "
        "recipe (rlvr-math, rlvr-code, rlvr-mix) / YAML file.",
    ),
    model: str = typer.Option(
        "smollm2-135m",
        "--model",
        "-m",
        help="Registry name, HF folder, run id (its newest checkpoint) or, for environments, "
        "'random' (the random-action baseline) or 'expert' (the env's solver, as a warm-up's "
        "demonstrations play).",
    ),
    compare: str = typer.Option(
        None,
        "--compare",
        help="A second model, evaluated on the same seeds / problems: adds the paired "
        "comparison (both rates, discordant counts, exact McNemar p-value).",
    ),
    n: int = typer.Option(
        None,
        "--n",
        help=f"Episodes for environments (default {ENV_EPISODES}: long, an episode with a real "
        "model takes seconds on a CPU), held-out problems for rlvr recipes (default "
        "data.val_size).",
    ),
    seed: int = typer.Option(
        None,
        "--seed",
        help="Environments: the first episode seed (default agentic.val_seed). rlvr: the data "
        "seed of the held-out problems (default the recipe's seed, i.e. a run's validation "
        "set) and the sampling seed.",
    ),
    k: int = typer.Option(
        1, "--k", help="rlvr: also sample K answers per problem and report pass@1 and pass@K."
    ),
    temperature: float = typer.Option(
        None,
        "--temperature",
        help="Sampling temperature: of the --k samples for rlvr (default rollout.temperature; "
        "accuracy is always greedy), of every reply for environments (default 0, greedy).",
    ),
    overrides: list[str] = typer.Argument(
        None,
        help="Recipe overrides as key.path=value, e.g. agentic.env_kwargs.size=3 or "
        "data.task_args.min_digits=2.",
    ),
    runs_dir: Path = RUNS_DIR,
    as_json: bool = typer.Option(
        False, "--json", help="Print the summary and every episode's / problem's outcome as JSON."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Evaluate a model on env episodes or an rlvr recipe's held-out problems (95% CIs).

    Per-item outcomes with --json, a paired comparison (exact McNemar) with --compare."""
    from rollcli.cli.eval_target import resolve_eval_target
    from rollcli.config.errors import ConfigError
    from rollcli.evaluation.agentic_eval import SCRIPTED

    with user_errors(debug):
        if n is not None and n < 1:
            raise ConfigError(f"--n {n}: evaluate at least one episode or problem")
        if k < 1:
            raise ConfigError(f"--k {k}: sample at least one answer")
        if temperature is not None and temperature < 0:
            raise ConfigError(f"--temperature {temperature}: must be 0 (greedy) or more")
        cfg, source = resolve_eval_target(target, overrides or [])
        models = [model] if compare is None else [model, compare]
        if spec_of(cfg).samples_prompts:
            payload, texts = _eval_rlvr(cfg, source, models, n, seed, k, temperature, runs_dir)
        else:
            if k != 1:
                raise ConfigError("--k applies to rlvr recipes; an episode is played once")
            if temperature is not None and all(m in SCRIPTED for m in models):
                raise ConfigError(f"--temperature applies to a model; {model!r} has none")
            payload, texts = _eval_env(cfg, source, models, n, seed, temperature or 0.0, runs_dir)
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    for text in texts:
        out.print(text, highlight=False, markup=False)


def _eval_rlvr(cfg, source, models, n, seed, k, temperature, runs_dir) -> tuple[dict, list[str]]:  # noqa: ANN001
    from rollcli.cli.errors import print_warning
    from rollcli.cli.eval_target import resolve_eval_model
    from rollcli.config.errors import ConfigError
    from rollcli.evaluation.rlvr_eval import evaluate_rlvr
    from rollcli.launch.reward_check import check_reward_calls

    if temperature is not None and k == 1:
        raise ConfigError(
            "--temperature applies to the --k samples (accuracy is greedy): add --k, e.g. --k 8"
        )
    n = cfg.data.val_size if n is None else n
    problems = f"{n} held-out problems" if n else "the held-out problems a run validates on"
    seed = cfg.seed if seed is None else seed
    temperature = cfg.rollout.temperature if temperature is None else temperature
    resolved = [  # every model is found before the first one is evaluated
        resolve_eval_model(name, runs_dir, cfg.model, playing_envs=False)[0] for name in models
    ]
    for warning in check_reward_calls(cfg):  # a reward that cannot score: refused here
        print_warning(warning)
    results = []
    for name, model_path in zip(models, resolved, strict=True):
        assert model_path is not None
        err_console.print(
            f"evaluating {name} on {source}: {problems}, greedy"
            + (f" + {k} samples each at temperature {temperature:g}" if k > 1 else ""),
            highlight=False,
            markup=False,
        )
        with progress(err_console) as report:
            results.append(
                evaluate_rlvr(
                    cfg, cfg.name, name, model_path, n=n, seed=seed, k=k,
                    temperature=temperature, num_threads=_threads(cfg), on_progress=report,
                )
            )  # fmt: skip
        summary = results[-1].summary()
        if summary["reward_errors"]:  # every answer failing raised above
            err_console.print(
                f"warning: reward {cfg.reward.fn!r} failed on {summary['reward_errors']} of "
                f"{len(results[-1].samples())} answers of {name}, scored 0 (first: "
                f"{summary['reward_error']})",
                highlight=False,
                markup=False,
            )
    payload, paired = _payload(
        [{**r.summary(), "outcomes": r.rows()} for r in results],
        [[p.correct for p in r.problems] for r in results],
        models,
    )
    texts = [_rlvr_text(r.summary()) for r in results] + paired
    if len(results) == 1:
        example = next((p for p in results[0].problems if p.correct), results[0].problems[0])
        texts.append(
            f"\nexample problem {example.id} ({'correct' if example.correct else 'wrong'}, "
            f"answer {example.answer!r})\n── prompt\n{example.prompt}\n── reply\n"
            f"{example.greedy.response.strip()}"
        )
    return payload, texts


def _eval_env(cfg, source, models, n, seed, temperature, runs_dir) -> tuple[dict, list[str]]:  # noqa: ANN001
    from rollcli.cli.eval_target import resolve_eval_model

    n = ENV_EPISODES if n is None else n
    seed = cfg.agentic.val_seed if seed is None else seed
    # every model is found before the seconds of imports and the first model's episodes
    resolved = [resolve_eval_model(name, runs_dir, cfg.model) for name in models]
    from rollcli.evaluation.agentic_eval import evaluate, render_episode

    results = []
    for name, (model_path, tokenizer_path) in zip(models, resolved, strict=True):
        err_console.print(
            f"evaluating {name} on {cfg.agentic.env} ({source}): {n} episodes from seed {seed}",
            highlight=False,
            markup=False,
        )
        with progress(err_console) as report:
            results.append(
                evaluate(
                    cfg.agentic, name, model_path, n=n, seed=seed,
                    max_new_tokens=cfg.rollout.max_new_tokens, temperature=temperature,
                    num_threads=_threads(cfg), tokenizer_path=tokenizer_path,
                    on_progress=lambda done, total: report("episodes", done, total),
                )
            )  # fmt: skip
    payload, paired = _payload(
        [{**r.summary(), "outcomes": r.rows()} for r in results],
        [[ep.success for ep in r.episodes] for r in results],
        models,
        [[ep.episode_return for ep in r.episodes] for r in results],
    )
    texts = [_env_text(r.summary()) for r in results] + paired
    if len(results) == 1:
        r = results[0]
        example = next((ep for ep in r.episodes if ep.success), r.episodes[0])
        texts.append("\nexample episode\n" + render_episode(example))
    return payload, texts


def _payload(
    summaries: list[dict],
    outcomes: list[list[bool]],
    models: list[str],
    scores: list[list[float]] | None = None,
) -> tuple[dict, list[str]]:
    """The JSON (one model: its summary and outcomes; two: both and the paired comparison,
    of the episode returns too when `scores` are given) and the paired table's text (none
    for one model)."""
    if len(summaries) == 1:
        return summaries[0], []
    from rollcli.evaluation.paired import paired_comparison, render_paired

    paired = paired_comparison(outcomes[0], outcomes[1], (scores[0], scores[1]) if scores else None)
    what = "episode seeds" if "episodes" in summaries[0] else "problems"
    text = render_paired(models[0], models[1], paired, what)
    return {"models": summaries, "paired": paired}, ["", text]


def _rlvr_text(s: dict[str, Any]) -> str:
    low, high = s["accuracy_ci95"]
    lines = [
        f"{s['recipe']} · model {s['model']} · {s['problems']} held-out problems",
        f"  greedy accuracy     {s['accuracy']:.3f}  (95% CI {low:.3f}-{high:.3f})",
        f"  mean score          {s['mean_score']:.3f}",
        f"  response tokens     {s['mean_response_tokens']:.1f}",
    ]
    if s["reward_errors"]:
        lines.append(f"  reward errors       {s['reward_errors']} (first: {s['reward_error']})")
    if "pass_at_k" in s:
        lo, hi = s["pass_at_k_ci95"]
        lines += [
            f"  pass@1              {s['pass_at_1']:.3f}  ({s['k']} samples at T={s['temperature']:g})",
            f"  pass@{s['k']:<15}{s['pass_at_k']:.3f}  (95% CI {lo:.3f}-{hi:.3f})",
        ]
    return "\n".join(lines)


def _env_text(s: dict[str, Any]) -> str:
    low, high = s["success_ci95"]
    return (
        f"{s['env']} · model {s['model']} · {s['episodes']} episodes\n"
        f"  success rate        {s['success_rate']:.3f}  (95% CI {low:.3f}-{high:.3f})\n"
        f"  mean reward         {s['mean_reward']:.3f}\n"
        f"  valid-action rate   {s['valid_action_rate']:.3f}\n"
        f"  effective actions   {s['effective_action_rate']:.3f}\n"
        f"  mean steps          {s['mean_steps']:.2f}"
        + (f"\n  env errors          {s['env_errors']}" if s["env_errors"] else "")
        + (_tool_text(s) if "tool_calls_per_episode" in s else "")
    )


def _tool_text(s: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in s["tool_error_kinds"].items() if v)
    return (
        f"\n  tool calls/episode  {s['tool_calls_per_episode']:.2f}"
        f"\n  calls that ran      {s['tool_call_valid']:.3f}"
        f"\n  tool errors         {s['tool_errors']}" + (f" ({kinds})" if kinds else "")
    )


def _threads(cfg) -> int:  # noqa: ANN001
    import os

    return max(1, int(cfg.resources.num_cpus or 0) or os.cpu_count() or 1)
