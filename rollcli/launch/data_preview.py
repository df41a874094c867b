"""`roll data preview`: the first training items of a recipe as the model will see them.

Each item: the prompt exactly as the model reads it (the chat template applied, special
tokens shown), its token count, the reference answer as parsed (`data.answer_key`,
`data.answer_pattern`), and the reward the recipe's reward gives that answer as a reply,
where the reward scores a reply against an answer (the math reward, user code): 1.0 says
the reward and the answer agree; a low score says the answer column or pattern is not what
the reward reads; a reward that fails shows its error (`reward_error`) instead. DPO items show the chosen and rejected replies, SFT items the reply.
"""

from __future__ import annotations

from typing import Any

from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import DistillRecipe, DPORecipe, RecipeConfig, RLVRRecipe, SFTRecipe

# rewards that compare a reply with the answer (the others score code or constraints)
ANSWER_REWARDS = ("math",)


def preview_rows(cfg: RecipeConfig, n: int) -> list[dict[str, Any]]:
    """The first `n` training items of `cfg`, one dict each (see the module docstring)."""
    items = spec_of(cfg).data_items
    if items is not None:
        tokenizer = _tokenizer(cfg)
        read = {"prompts": _prompt_rows, "pairs": _pair_rows, "chats": _chat_rows}[items]
        return read(cfg, tokenizer, n)
    from rollcli.config.errors import ConfigError

    raise ConfigError(
        f"{cfg.name} is an {cfg.pipeline} recipe: its prompts come from environments; "
        "`roll data episodes` plays some"
    )


def _tokenizer(cfg: RecipeConfig) -> Any:
    """The recipe model's tokenizer; a hub model not in the cache fetches its tokenizer
    files alone (not the weights)."""
    from rollcli.models.loading import hub_model, hub_model_cached, resolve_model
    from rollcli.strategies.hf_model import load_tokenizer

    repo = hub_model(cfg.model)
    if repo is None or hub_model_cached(cfg.model) is not None:
        return load_tokenizer(resolve_model(cfg.model))
    from transformers import AutoTokenizer

    from rollcli.models.hub import hub_cache

    name, revision = repo
    return AutoTokenizer.from_pretrained(name, revision=revision, cache_dir=str(hub_cache()))


def _render(tokenizer: Any, messages: Any) -> tuple[str, int]:
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return text, len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _prompt_rows(cfg: RecipeConfig, tokenizer: Any, n: int) -> list[dict[str, Any]]:
    from rollcli.data.prompt_sets import load_prompt_data
    from rollcli.rewards.conventions import reward_columns
    from rollcli.rewards.registry import load_reward_fn
    from rollcli.rewards.runner import score_one
    from rollcli.rollout.prompt_scheduler import sample_fields

    assert isinstance(cfg, RLVRRecipe)  # the spec's pipeline whose rows are prompts
    reward = cfg.reward
    prompts = load_prompt_data(cfg.data, cfg.seed, reward_columns(reward)).train[:n]
    rows = []
    for p in prompts:
        text, tokens = _render(tokenizer, p.messages)
        ref = reward.routes.get(p.tag, reward.routes.get("*")) if reward.fn == "mix" else reward.fn
        score, error = None, None
        if ref is not None and (ref in ANSWER_REWARDS or ":" in ref):
            sample = {**sample_fields(p), "response": p.answer, "finished": True}
            convention = reward.convention if ref == reward.fn else "auto"
            options = reward.worker_options
            if reward.fn == "mix":  # as the mix reward calls its routes
                options = {k: v for k, v in options.items() if k not in ("routes", "route_options")}
                options |= reward.route_options.get(p.tag, {})
            fn = load_reward_fn(ref)
            result = score_one(fn, sample, options, reward.timeout_s, convention)
            score, error = (None, result["error"]) if result["error"] else (result["score"], None)
        rows.append(
            {
                "id": p.id,
                "prompt": text,
                "prompt_tokens": tokens,
                "answer": p.answer,
                "reward": score,
                **({"reward_error": error} if error else {}),
            }
        )
    return rows


def _pair_rows(cfg: RecipeConfig, tokenizer: Any, n: int) -> list[dict[str, Any]]:
    from rollcli.data.offline_sets import load_pair_sets

    assert isinstance(cfg, DPORecipe)  # the spec's pipeline whose rows are pairs
    rows = []
    for pair in load_pair_sets(cfg.data, cfg.seed)[0][:n]:
        text, tokens = _render(tokenizer, pair.prompt)
        rows.append(
            {
                "id": pair.id,
                "prompt": text,
                "prompt_tokens": tokens,
                "answer": pair.chosen,
                "reward": None,
                "rejected": pair.rejected,
            }
        )
    return rows


def _chat_rows(cfg: RecipeConfig, tokenizer: Any, n: int) -> list[dict[str, Any]]:
    from rollcli.data.offline_sets import load_chat_sets

    assert isinstance(cfg, (SFTRecipe, DistillRecipe))  # the pipelines whose rows are chats
    rows = []
    for ex in load_chat_sets(cfg.data, cfg.seed)[0][:n]:
        text, tokens = _render(tokenizer, ex.prompt_messages)
        reply = ex.messages[len(ex.prompt_messages)]["content"]
        rows.append(
            {
                "id": ex.id,
                "prompt": text,
                "prompt_tokens": tokens,
                "answer": ex.answer,
                "reward": None,
                "response": reply,
            }
        )
    return rows
