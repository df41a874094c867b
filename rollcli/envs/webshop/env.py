"""The WebShop environment: text-mode shopping with WebShop's purchase reward.

An episode: the shopper gets an instruction ("i need ... and price lower than 40.00
dollars"), searches, pages through results, opens products, reads their sub-pages, picks
options and buys. Buying ends the episode with `reward.purchase_reward`; running out of
steps truncates it with reward 0. A malformed or unavailable action leaves the page as it
was and earns `format_penalty` (a negative number, added to the reward). A valid action
that changes nothing (clicking an option that is already selected) earns
`no_effect_penalty` (0 by default) and, with `no_effect_feedback`, starts the next
observation with a line saying so. The `info` keys follow `rollcli.envs.text_env`
(`action`, `action_is_valid`, `action_is_effective`, `success`, `format_penalty`,
`parse_reason`, `steps`, `no_effect_penalty`).

Example:
    >>> env = WebShopEnv(num_products=60, catalogue_seed=3)
    >>> obs, info = env.reset(seed=0)
    >>> obs.startswith("WebShop [SEP] Instruction:")
    True
    >>> obs, r, term, trunc, info = env.step("<answer>search[" + env.goal.query + "]</answer>")
    >>> info["action_is_valid"], info["action_is_effective"], env.state.kind
    (True, True, 'results')
    >>> env.step("<answer>jump</answer>")[1]
    -0.1
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from rollcli.envs.registry import register_env
from rollcli.envs.text_env import checked_no_effect_penalty, reset_info
from rollcli.envs.webshop.actions import parse_webshop_action
from rollcli.envs.webshop.catalog import Catalogue, Goal
from rollcli.envs.webshop.generator import generate_catalogue
from rollcli.envs.webshop.loader import load_webshop
from rollcli.envs.webshop.oracle import OracleAgent
from rollcli.envs.webshop.pages import (
    BACK_TO_SEARCH,
    BUY_NOW,
    NEXT_PAGE,
    PREV_PAGE,
    SUBPAGES,
    PageState,
    clickables,
    option_lookup,
    render,
)
from rollcli.envs.webshop.reward import purchase_reward
from rollcli.envs.webshop.search import SearchEngine

INSTRUCTIONS = """You are shopping in WebShop for the product described by the instruction.
Each observation is the current web page, its elements separated by [SEP], followed by the
actions available on it. Act with exactly one action per turn, inside <answer></answer>:
- search[keywords] on the search page, e.g. <answer>search[red running shoes]</answer>
- click[value] with one of the listed clickable values, e.g. <answer>click[b0abc12345]</answer>,
  <answer>click[next >]</answer>, <answer>click[large]</answer>, <answer>click[buy now]</answer>
On a product page, click the option values the instruction asks for (size, color, ...) before
click[buy now]. Buying ends the episode; the reward (0 to 1) measures how well the product
matches the instruction's type, attributes, options and price limit."""

NO_EFFECT_NOTE = "Nothing changed: {action} is already selected."
_EMPTY_COMPONENTS = {"r_att": 0.0, "r_option": None, "r_price": 0.0, "r_type": 0.0}


def _canonical(action_text: str) -> str:
    verb, arg = parse_webshop_action(action_text) or ("", "")
    return f"{verb}[{arg.lower() if verb == 'click' else arg}]"


@functools.lru_cache(maxsize=8)
def generated_shop(num_products: int, seed: int) -> tuple[Catalogue, SearchEngine]:
    """A generated catalogue and its index, shared by every env built with the same arguments."""
    catalogue = generate_catalogue(num_products=num_products, seed=seed)
    return catalogue, SearchEngine(catalogue.products)


@functools.lru_cache(maxsize=4)
def webshop_file_shop(
    products_path: str, instructions_path: str | None, seed: int
) -> tuple[Catalogue, SearchEngine]:
    """A catalogue read from WebShop's files (see `loader.load_webshop`) and its index."""
    catalogue = load_webshop(products_path, instructions_path, seed=seed)
    return catalogue, SearchEngine(catalogue.products)


@register_env(
    "webshop",
    description="WebShop text-mode shopping (search/click/buy) with WebShop's attribute, option, "
    "price and type reward; generated catalogue by default, WebShop's files optionally",
)
class WebShopEnv(gym.Env):
    """WebShop's text mode on a generated or loaded catalogue.

    Args:
        catalogue: a ready `Catalogue` (overrides the next arguments).
        num_products, catalogue_seed: the generated catalogue to use by default.
        products_path, instructions_path: WebShop's product documents (``.jsonl``/``.json``)
            and ``items_ins_v2*.json``; when given, the catalogue is loaded from them.
        split: the goal split episodes draw from: train, validation, test or all.
        max_steps: actions per episode before truncation (reward 0).
        format_penalty: the reward of an invalid action (negative, as for every roll env).
        num_results, results_per_page: search results kept and shown per page (WebShop: 50, 10).
        goal_by_seed: a seed picks goal ``seed % len(goals)`` instead of a random one, so
            consecutive seeds walk the split's goals in order (an evaluation of up to
            ``len(goals)`` episodes plays each goal once).
        no_effect_feedback, no_effect_penalty: for a valid action that leaves the page as
            it was, a note before the next observation and a reward (0 or negative).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        catalogue: Catalogue | None = None,
        *,
        num_products: int = 1000,
        catalogue_seed: int = 0,
        products_path: str | Path | None = None,
        instructions_path: str | Path | None = None,
        split: str = "train",
        max_steps: int = 15,
        format_penalty: float = -0.1,
        num_results: int = 50,
        results_per_page: int = 10,
        goal_by_seed: bool = False,
        no_effect_feedback: bool = False,
        no_effect_penalty: float = 0.0,
    ) -> None:
        if catalogue is not None:
            self.catalogue, self.engine = catalogue, SearchEngine(catalogue.products)
        elif products_path is not None:
            ins = str(instructions_path) if instructions_path is not None else None
            self.catalogue, self.engine = webshop_file_shop(str(products_path), ins, catalogue_seed)
        else:
            self.catalogue, self.engine = generated_shop(num_products, catalogue_seed)
        self.goals = self.catalogue.split(split)
        if not self.goals:
            raise ValueError(f"goal split {split!r} of catalogue {self.catalogue.source} is empty")
        self.max_steps = max_steps
        self.format_penalty = float(format_penalty)
        self.action_space = gym.spaces.Text(100_000, min_length=0)
        self.num_results = num_results
        self.per_page = results_per_page
        self.goal_by_seed = goal_by_seed
        self.no_effect_feedback = bool(no_effect_feedback)
        self.no_effect_penalty = checked_no_effect_penalty(no_effect_penalty)
        self.instructions = INSTRUCTIONS
        self._asin_by_lower = {p.asin.lower(): p.asin for p in self.catalogue.products}
        self.goal: Goal = self.goals[0]
        self.goal_index = 0
        self.state = PageState()
        self.steps = 0
        self.done = False

    # ---- gymnasium API -------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict]:
        """Start an episode on a goal drawn with `seed` (or ``options={"goal_index": i}``)."""
        super().reset(seed=seed)
        options = options or {}
        if "goal" in options:
            self.goal, self.goal_index = options["goal"], -1
        else:
            index = options.get("goal_index")
            if index is None and self.goal_by_seed and seed is not None:
                index = seed
            if index is None:
                index = int(self.np_random.integers(len(self.goals)))
            self.goal_index = int(index) % len(self.goals)
            self.goal = self.goals[self.goal_index]
        self.state = PageState()
        self.steps = 0
        self.done = False
        info = reset_info(goal_index=self.goal_index, instruction=self.goal.instruction)
        info["available_actions"] = self.available_actions()
        return self.render_text(), info

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict]:
        if self.done:
            raise RuntimeError("the episode is over; call reset() first")
        before = self.state
        new_state, bought, reason = self._transition(action_text)
        valid = new_state is not None
        self.state = new_state if new_state is not None else before
        self.steps += 1
        idle = valid and not bought and self.state.key() == before.key()
        no_effect = self.no_effect_penalty if idle else 0.0
        reward = (0.0 if valid else self.format_penalty) + no_effect
        info: dict[str, Any] = {
            "action_is_valid": valid,
            "action_is_effective": valid and not idle,
            "format_penalty": 0.0 if valid else self.format_penalty,
            "no_effect_penalty": no_effect,
            "parse_reason": reason or "ok",
            "action": _canonical(action_text) if valid else None,
            "steps": self.steps,
            "success": False,
        }
        terminated = bought
        truncated = not bought and self.steps >= self.max_steps
        if bought:
            breakdown = purchase_reward(
                self.catalogue.by_asin[self.state.asin], self.state.chosen_options(), self.goal
            )
            reward = breakdown.reward  # buying is always effective: no penalty to add
            info.update(breakdown.as_info())
            info["success"] = breakdown.reward == 1.0
            info["bought_asin"] = self.state.asin
        elif truncated:
            info.update(_EMPTY_COMPONENTS)
        self.done = terminated or truncated
        info["available_actions"] = [] if self.done else self.available_actions()
        obs = self.render_text()
        if self.no_effect_feedback and idle:
            obs = f"{NO_EFFECT_NOTE.format(action=info['action'])}\n{obs}"
        return obs, reward, terminated, truncated, info

    # ---- text helpers ---------------------------------------------------------------------

    def available_actions(self) -> list[str]:
        """Actions valid on the current page (``search[<keywords>]`` stands for any search)."""
        if self.state.kind == "search":
            return ["search[<keywords>]"]
        return [
            f"click[{value}]"
            for value in clickables(self.state, self.catalogue.by_asin, self.per_page)
        ]

    @property
    def action_names(self) -> list[str]:
        return self.available_actions()

    def page_text(self) -> str:
        """The page alone, exactly as WebShop's text observation."""
        return render(self.state, self.catalogue.by_asin, self.goal.instruction, self.per_page)

    def render_text(self) -> str:
        """The page followed by its available actions: the observation shown to the model."""
        return f"{self.page_text()}\nAvailable actions: {', '.join(self.available_actions())}"

    def render(self) -> str:
        return self.render_text()

    def get_state_key(self) -> str:
        return f"{self.goal_index}|{self.state.key()}"

    def expert_action(self) -> str:
        """The oracle's next action (`OracleAgent`: it reads the goal, then searches, opens
        the best-matching result, picks the goal's options and buys), for `roll data
        episodes --policy expert` and an agentic recipe's warm-up."""
        return OracleAgent().action(self)

    # ---- page transitions -----------------------------------------------------------------

    def _transition(self, action_text: str) -> tuple[PageState | None, bool, str]:
        """(next page or None if invalid, whether this action bought, reason if invalid)."""
        parsed = parse_webshop_action(action_text)
        if parsed is None:
            return None, False, "expected search[keywords] or click[value] inside <answer></answer>"
        verb, arg = parsed
        state = self.state
        if verb == "search":
            if state.kind != "search":
                return (
                    None,
                    False,
                    "search is only available on the search page (click[back to search])",
                )
            if not arg:
                return None, False, "empty search"
            results = tuple(self.engine.search(arg, k=self.num_results))
            return PageState(kind="results", query=arg, results=results), False, ""
        value = arg.lower()
        if value not in clickables(state, self.catalogue.by_asin, self.per_page):
            return None, False, f"{value!r} is not clickable on this page"
        if value == BACK_TO_SEARCH:
            return PageState(), False, ""
        if state.kind == "results":
            if value == NEXT_PAGE:
                return replace(state, page=state.page + 1), False, ""
            if value == PREV_PAGE:
                return replace(state, page=state.page - 1), False, ""
            return (
                replace(state, kind="item", asin=self._asin_by_lower[value], chosen=()),
                False,
                "",
            )
        if state.kind == "item":
            if value == PREV_PAGE:
                return replace(state, kind="results", asin="", chosen=()), False, ""
            if value == BUY_NOW:
                return state, True, ""
            if value in SUBPAGES:
                return replace(state, kind=value), False, ""
            name, listed = option_lookup(self.catalogue.by_asin[state.asin])[value]
            return state.with_option(name, listed), False, ""
        return replace(state, kind="item"), False, ""  # a sub-page's "< prev"
