"""`roll data episodes` and an agentic run's warm-up: episodes of a scripted policy,
written as SFT conversations (`write_episodes`).

The episodes are played by the agentic pipeline's own scheduler, env workers, prompts and
parsing (`play_episodes`, plain objects in this process), so each conversation is exactly
what an RL run of the same recipe shows the model: its system prompt (the env's
instructions, with a tool env's tools declared), its observations and step outcomes as user
turns, and each move as an assistant turn ``<answer>Move</answer>`` (the recipe's
`reply_prefix` included, as in the run's samples files), or for a tool env the whole reply,
a ``<tool_call>`` or the final answer. `roll train sft
data.path=FILE` trains on every assistant turn.

Two policies:

- ``expert``: the env's `expert_action` each turn (FrozenLake: a first move of a shortest
  safe walk to the goal; Sokoban: the first move of a shortest solution, by breadth-first
  search; WebShop: the oracle's next action, which reads the goal). On non-slippery ice and
  in generated Sokoban rooms every expert episode succeeds within the recipe's turn limit if
  the shortest solution fits in it. An env whose replies are more than a move has
  `expert_reply` instead, the whole reply (the tool env: a calculator call on the task's
  expression, then the result as the answer).
- ``random``: a uniformly random legal move each turn (the format-only control: it teaches
  the answer format and flattens the prior over moves, not the task).

Seeds are `seed, seed + 1, ...` below `agentic.val_seed`, and envs that split layouts draw
training layouts, so no episode shows a validation map.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.config.agentic_section import AgenticConfig
from rollcli.config.errors import ConfigError
from rollcli.config.warmup_section import POLICIES
from rollcli.rollout.agentic_setup import env_kwargs, host_turn_format, limits
from rollcli.rollout.episode import Episode, EpisodeSpec
from rollcli.rollout.episode_scheduler import (
    expert_policy,
    has_expert,
    play_episodes,
    random_policy,
)
from rollcli.workers.env_worker import EnvArgs, EnvWorker

if TYPE_CHECKING:
    from rollcli.config.recipe import AgenticRecipe


def scripted_episodes(
    agentic: AgenticConfig,
    tokenizer: Any,
    *,
    policy: str,
    n: int,
    seed: int,
    max_new_tokens: int,
    on_progress: Any = None,
) -> list[Episode]:
    """`n` episodes of `policy` on training seeds `seed, seed + 1, ...`; `tokenizer` (the
    recipe model's) only builds the token ids the episode bookkeeping keeps."""
    if policy not in POLICIES:
        raise ConfigError(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
    if n < 1:
        raise ConfigError(f"--n {n}: write at least one episode")
    if seed < 0 or seed + n > agentic.val_seed:
        raise ConfigError(
            f"--seed {seed} --n {n}: seeds must stay below agentic.val_seed = "
            f"{agentic.val_seed} (those are validation seeds)"
        )
    hosts = [EnvWorker(EnvArgs(agentic.env, env_kwargs(agentic)))]
    if policy == "expert":
        if not has_expert(hosts[0].probe):
            raise ConfigError(
                f"environment {agentic.env!r} has no expert policy; use --policy random"
            )
        chosen = expert_policy(hosts, agentic.reply_prefix)
    else:
        chosen = random_policy(seed, agentic.reply_prefix)
    fmt = host_turn_format(tokenizer, hosts[0], agentic)
    specs = [EpisodeSpec(i, i, seed + i) for i in range(n)]
    try:
        episodes, _ = play_episodes(
            hosts, chosen, specs, fmt, limits(agentic, max_new_tokens), on_progress
        )
    except ValueError as exc:  # the policy's: a task the expert cannot solve, a reply prefix
        raise ConfigError(f"--policy {policy}: {exc}") from None
    return episodes


def sft_rows(episodes: list[Episode], env: str) -> list[dict[str, Any]]:
    """One chat row per episode with at least one move: `{id, tag, messages}`."""
    return [
        {"id": f"{env}-seed{ep.spec.seed}", "tag": env, "messages": ep.messages}
        for ep in episodes
        if ep.trainable
    ]


def write_episodes(
    cfg: AgenticRecipe,
    path: Path,
    *,
    policy: str,
    n: int,
    seed: int,
    on_progress: Any = None,
) -> list[Episode]:
    """Play `n` episodes of `policy` on the agentic recipe `cfg` from env seed `seed` and
    write them to `path` as `sft_rows`, whole or not at all (a `.partial` file renamed);
    returns the episodes played. `on_progress(done, total)` as episodes finish."""
    from rollcli.data.from_run import write_jsonl
    from rollcli.models.loading import resolve_model
    from rollcli.strategies.hf_model import load_tokenizer

    played = scripted_episodes(
        cfg.agentic,
        load_tokenizer(resolve_model(cfg.model)),
        policy=policy,
        n=n,
        seed=seed,
        max_new_tokens=cfg.rollout.max_new_tokens,
        on_progress=on_progress,
    )
    partial = path.with_name(path.name + ".partial")
    write_jsonl(sft_rows(played, cfg.agentic.env), partial)
    partial.replace(path)
    return played
