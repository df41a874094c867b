"""The recipe's own reward code, called before anything starts.

`check_reward_calls` (by `check_recipe`: `roll plan`, `roll train` and its `--dry-run`,
`roll doctor`; and by `roll data preview` and `roll eval`) calls each user reward the recipe
names (`reward.fn`, or each user-code route of `mix`) the way training will, on the first
training prompts: once with each prompt's reference answer as the reply, once with a wrong
reply. A reward that cannot be called with its convention's parameters, raises on the
reference answer, or returns something that is not a score (or a list of another length
than the batch's) is refused in one line naming the call roll made and what came back; a
raise on the wrong reply is a warning (training scores such replies 0, with the error).

Built-in rewards are not called here: their calls are roll's own, tested in the suite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rollcli.config.errors import ConfigError
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import RLVRRecipe

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.data.prompts import Prompt

FIRST = 2  # prompts the reward is called on (of each mix domain)
WRONG_REPLY = "I am not sure."


def check_reward_calls(cfg: RecipeConfig) -> list[str]:
    """Raise `ConfigError` for a user reward of `cfg` that cannot score its first prompts'
    reference answers; return the warnings (a raise on a wrong reply), one line each."""
    reward = getattr(cfg, "reward", None)
    if reward is None or not spec_of(cfg).reads_prompts:
        return []
    from rollcli.rewards.conventions import reward_columns, user_rewards

    users = dict(user_rewards(reward))
    if not users:
        return []
    from rollcli.data.first_prompts import first_prompts

    assert isinstance(cfg, RLVRRecipe)  # the spec's pipeline that reads prompts
    prompts = first_prompts(cfg.data, cfg.seed, FIRST, reward_columns(reward))
    warnings = []
    for key, ref, tagged, options in _calls(reward, prompts, users):
        warning = probe(key, ref, users[ref], tagged, options, reward.timeout_s)
        if warning:
            warnings.append(warning)
    return warnings


def _calls(
    reward: Any, prompts: list[Prompt], users: dict[str, str]
) -> list[tuple[str, str, list[Prompt], dict[str, Any]]]:
    """(recipe key, reference, its prompts, its options) of each user function to call:
    `reward.fn` on every prompt, or a `mix` route on the prompts of its tags."""
    if reward.fn != "mix":
        return [("reward.fn", reward.fn, prompts, reward.worker_options)]
    from rollcli.rewards.mix import route_for

    shared = {
        k: v for k, v in reward.worker_options.items() if k not in ("routes", "route_options")
    }
    calls = []
    for tag in dict.fromkeys(p.tag for p in prompts):
        try:
            ref = route_for(tag, reward.routes)
        except KeyError:
            continue  # a tag without a route fails in training with its own message
        if ref in users:
            key = f"reward.routes.{tag if tag in reward.routes else '*'}"
            options = {**shared, **reward.route_options.get(tag, {})}
            calls.append((key, ref, [p for p in prompts if p.tag == tag], options))
    return calls


def probe(
    key: str,
    ref: str,
    convention: str,
    prompts: list[Prompt],
    options: dict[str, Any],
    timeout_s: float,
) -> str | None:
    """Call `ref` on `prompts` as training does: `ConfigError` when the reference answers
    as replies fail; the warning when a wrong reply does (else None)."""
    from rollcli.rewards.conventions import bind
    from rollcli.rewards.registry import load_reward_fn
    from rollcli.rewards.runner import score_samples
    from rollcli.rollout.prompt_scheduler import sample_fields

    fn = load_reward_fn(ref)
    name = bind(fn, convention).convention.name
    right = [
        {**sample_fields(p), "response": p.answer, "finished": True, "response_ids": []}
        for p in prompts
    ]
    results = score_samples(fn, right, options, timeout_s, convention)
    for sample, result in zip(right, results, strict=True):
        if result["error"]:
            raise ConfigError(
                f"{key} = {ref!r} ({name} convention) cannot score the reference answer "
                f"{sample['answer']!r} as a reply: {result['error']}"
            )
    wrong = [{**s, "response": WRONG_REPLY} for s in right]
    for result in score_samples(fn, wrong, options, timeout_s, convention):
        if result["error"]:
            return (
                f"warning: {key} = {ref!r} fails on the reply {WRONG_REPLY!r} (training scores "
                f"such replies 0): {result['error']}"
            )
    return None
