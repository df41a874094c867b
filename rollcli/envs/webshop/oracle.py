"""Scripted agents for WebShop: an oracle that proves goals are solvable, and a random baseline.

The oracle reads the goal (privileged) but acts only through ordinary actions:

1. ``search[<instruction without its price clause>]``;
2. score every search result by the reward it would get if bought with the goal's options
   (all of which a careful reader can see on the product's pages), walk ``next >`` to the
   page holding the best one (earliest on ties) and click it;
3. click each goal option's matching value, then ``buy now``.

The random agent searches the instruction, then clicks uniformly among available actions.

Example:
    >>> from rollcli.envs.webshop.env import WebShopEnv
    >>> env = WebShopEnv(num_products=200, catalogue_seed=0)
    >>> run_episode(env, OracleAgent(), goal_index=0)["reward"]
    1.0
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rollcli.envs.webshop.catalog import Goal, Product
from rollcli.envs.webshop.pages import BUY_NOW, NEXT_PAGE, page_results
from rollcli.envs.webshop.reward import option_value_matches, purchase_reward

if TYPE_CHECKING:
    from rollcli.envs.webshop.env import WebShopEnv

_PRICE_CLAUSE = re.compile(r",?\s*and price lower than [\d.]+ dollars\s*$", re.IGNORECASE)


def search_query(instruction: str) -> str:
    """
    >>> search_query("i need a lip balm, and price lower than 20.00 dollars")
    'i need a lip balm'
    """
    return _PRICE_CLAUSE.sub("", instruction).strip()


def matching_options(product: Product, goal: Goal) -> dict[str, str]:
    """For each goal option, the product's first value that satisfies it (if any)."""
    chosen = {}
    for name, wanted in goal.options.items():
        values = product.options.get(name, [])
        hit = next((v for v in values if option_value_matches(name, wanted, v)), None)
        if hit is not None:
            chosen[name] = hit
    return chosen


def expected_reward(product: Product, goal: Goal) -> float:
    return purchase_reward(product, matching_options(product, goal), goal).reward


class OracleAgent:
    """Goal-aware scripted shopper (see the module docstring).

    With ``rank_by_reward=False`` it clicks the first search result instead of the best one,
    which measures how often plain BM25 on the instruction puts a right product first.
    """

    def __init__(self, rank_by_reward: bool = True) -> None:
        self.rank_by_reward = rank_by_reward

    def __call__(self, env: WebShopEnv) -> str:
        return f"<answer>{self.action(env)}</answer>"

    def action(self, env: WebShopEnv) -> str:
        """The next action, bare (``search[...]`` or ``click[...]``)."""
        state, goal = env.state, env.goal
        if state.kind == "search":
            return f"search[{search_query(goal.instruction)}]"
        if state.kind == "results":
            if not state.results:
                return "click[back to search]"
            target = state.results[0]
            if self.rank_by_reward:
                by_asin = env.catalogue.by_asin
                scores = [expected_reward(by_asin[a], goal) for a in state.results]
                target = state.results[max(range(len(scores)), key=lambda i: (scores[i], -i))]
            if target in page_results(state, env.per_page):
                return f"click[{target.lower()}]"
            return f"click[{NEXT_PAGE}]"
        if state.kind != "item":
            return "click[< prev]"
        product = env.catalogue.by_asin[state.asin]
        chosen = state.chosen_options()
        for name, value in matching_options(product, goal).items():
            if chosen.get(name) != value:
                return f"click[{value.lower()}]"
        return f"click[{BUY_NOW}]"


class RandomAgent:
    """Searches the instruction, then clicks uniformly at random."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def __call__(self, env: WebShopEnv) -> str:
        if env.state.kind == "search":
            return f"<answer>search[{search_query(env.goal.instruction)}]</answer>"
        return f"<answer>{self.rng.choice(env.available_actions())}</answer>"


def run_episode(
    env: WebShopEnv,
    agent: Callable[[WebShopEnv], str],
    goal_index: int | None = None,
    seed: int | None = None,
) -> dict:
    """Play one episode; returns reward, success, steps and the final info."""
    options = {"goal_index": goal_index} if goal_index is not None else None
    env.reset(seed=seed, options=options)
    info: dict[str, Any] = {}
    reward, steps = 0.0, 0
    while True:
        _, reward, terminated, truncated, info = env.step(agent(env))
        steps += 1
        if terminated or truncated:
            break
    return {"reward": reward, "success": bool(info.get("success")), "steps": steps, "info": info}


def evaluate(env: WebShopEnv, agent: Callable[[WebShopEnv], str], n: int | None = None) -> dict:
    """Mean reward and success rate over the first `n` goals of the env's split (all by default)."""
    n = len(env.goals) if n is None else min(n, len(env.goals))
    results = [run_episode(env, agent, goal_index=i) for i in range(n)]
    return {
        "episodes": n,
        "mean_reward": sum(r["reward"] for r in results) / max(n, 1),
        "success_rate": sum(r["success"] for r in results) / max(n, 1),
        "mean_steps": sum(r["steps"] for r in results) / max(n, 1),
    }
