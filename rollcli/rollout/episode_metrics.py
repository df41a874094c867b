"""What a batch of finished episodes says: success, action quality, length, errors.

Rates over steps count every model turn of every episode; rates over episodes count each
episode once. Keys (with the prefix, `env/` for training episodes and `val/` for
validation):

=========================  ==========================================================
``success_rate``           episodes whose last step reported ``success``
``return_mean``            mean episode return (sum of step rewards, penalties included)
``valid_action_rate``      turns whose reply parsed to a legal action
``effective_action_rate``  turns whose action changed the state
``mean_steps``             model turns per episode
``format_penalty``         mean total format penalty per episode (<= 0)
``format_errors``          turns whose reply did not parse (count)
``env_errors``             episodes ended by an exception in the env (count)
``cut_frac``               episodes ended by the turn or context limit
=========================  ==========================================================

Tool environments (`rollcli.envs.tools`) add `tool_metrics`: ``tool_calls`` (replies that
called a tool, well-formed or not), ``tool_calls_per_episode``, ``tool_errors`` (calls that
gave an error observation), ``tool_call_valid`` (the share of calls that ran and returned a
result) and ``tool_error/<kind>`` for each kind of `ToolEnv`'s errors (count).

Training steps also log (no prefix choice) what a collapse looks like:
``agentic/action_frac/<Action>`` (`action_fractions`), ``agentic/informative_groups`` and
``agentic/kept_groups`` (`agentic_batch.keep_informative_groups`) and
``agentic/first_action_entropy`` (the actor's entropy on each reply's first action token,
over the rows the update computed: `actor/trained_rows_frac`).
"""

from __future__ import annotations

import math
from collections import Counter

from rollcli.envs.tools.env import TOOL_ERRORS
from rollcli.rollout.episode import Episode


def episode_metrics(episodes: list[Episode], prefix: str) -> dict[str, float]:
    n = max(len(episodes), 1)
    infos = [info for ep in episodes for info in ep.infos]
    turns = max(len(infos), 1)
    returns = [ep.episode_return for ep in episodes]
    mean = sum(returns) / n
    out = {
        "success_rate": sum(ep.success for ep in episodes) / n,
        "return_mean": mean,
        "return_std": math.sqrt(sum((r - mean) ** 2 for r in returns) / n),
        "valid_action_rate": sum(bool(i.get("action_is_valid")) for i in infos) / turns,
        "effective_action_rate": sum(bool(i.get("action_is_effective")) for i in infos) / turns,
        "mean_steps": sum(ep.turns for ep in episodes) / n,
        "format_penalty": sum(float(i.get("format_penalty") or 0.0) for i in infos) / n,
        "format_errors": float(sum(not i.get("action_is_valid", True) for i in infos)),
        "env_errors": float(sum(ep.error is not None for ep in episodes)),
        "cut_frac": sum(ep.end in ("max_turns", "context") for ep in episodes) / n,
        **tool_metrics(infos, len(episodes)),
    }
    return {f"{prefix}/{k}": v for k, v in out.items()}


def tool_metrics(infos: list[dict], episodes: int) -> dict[str, float]:
    """Tool calls and their errors over the steps of `episodes` episodes of a tool env
    (steps whose info has ``tool_call``); nothing for other envs.

    >>> m = tool_metrics([{"tool_call": 1, "tool_error": ""}, {"tool_call": 1,
    ...     "tool_error": "timeout"}, {"tool_call": 0, "tool_error": ""}], episodes=1)
    >>> m["tool_call_valid"], m["tool_calls_per_episode"], m["tool_error/timeout"]
    (0.5, 2.0, 1.0)
    """
    steps = [i for i in infos if "tool_call" in i]
    if not steps:
        return {}
    calls = sum(int(i["tool_call"]) for i in steps)
    kinds = Counter(str(i["tool_error"]) for i in steps if i.get("tool_error"))
    errors = sum(kinds.values())
    return {
        "tool_calls": float(calls),
        "tool_calls_per_episode": calls / max(episodes, 1),
        "tool_errors": float(errors),
        "tool_call_valid": (calls - errors) / calls if calls else 0.0,
        **{f"tool_error/{kind}": float(kinds[kind]) for kind in TOOL_ERRORS},
    }


def summary_line(metrics: dict[str, float], prefix: str) -> str:
    """One line for the live display: a tool env's calls per episode in place of the share of
    effective actions (a game's notion; an agent program's turns report none).

    >>> summary_line({"env/success_rate": 0.5, "env/valid_action_rate": 0.9,
    ...               "env/effective_action_rate": 0.8, "env/mean_steps": 2}, "env")
    'success 0.500 · valid 0.90 · effective 0.80 · steps 2.0 · return 0.00'
    >>> summary_line({"env/tool_calls_per_episode": 1.25, "env/tool_call_valid": 0.8}, "env")
    'success 0.000 · valid 0.00 · calls 1.25 · steps 0.0 · return 0.00'
    >>> summary_line({"val/sokoban/success_rate": 0.25, "val/sokoban/valid_action_rate": 1.0},
    ...              "val/sokoban")
    'success 0.250 · valid 1.00 · effective 0.00 · steps 0.0 · return 0.00'
    """
    m = {k[len(prefix) + 1 :]: v for k, v in metrics.items() if k.startswith(prefix + "/")}
    if "tool_calls_per_episode" in m:
        middle = f"calls {m['tool_calls_per_episode']:.2f}"  # per episode
    else:
        middle = f"effective {m.get('effective_action_rate', 0):.2f}"
    return (
        f"success {m.get('success_rate', 0):.3f} · valid {m.get('valid_action_rate', 0):.2f}"
        f" · {middle} · steps {m.get('mean_steps', 0):.1f} · return {m.get('return_mean', 0):.2f}"
    )


def action_fractions(episodes: list[Episode]) -> dict[str, float]:
    """`agentic/action_frac/<Action>`: the share of all turns that took each action; a reply
    that named no legal action counts as `invalid`. WebShop's `search[...]` / `click[...]`
    count by their verb.

    >>> from rollcli.rollout.episode import EpisodeSpec
    >>> ep = Episode(EpisodeSpec(0, 0, 0), infos=[{"action": "Left"}, {"action": None},
    ...     {"action": "Left"}, {"action": "click[buy now]"}])
    >>> action_fractions([ep])
    {'agentic/action_frac/Left': 0.5, 'agentic/action_frac/invalid': 0.25, 'agentic/action_frac/click': 0.25}
    """
    names = [
        str(info["action"]).split("[")[0] if info.get("action") else "invalid"
        for ep in episodes
        for info in ep.infos
    ]
    counts = Counter(names)
    return {f"agentic/action_frac/{a}": c / len(names) for a, c in counts.items()}
