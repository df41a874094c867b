"""The `judge_local` reward: a transformers model, loaded once in the reward worker's process,
grades each response by how likely it is to answer "yes".

The rubric (with `{prompt}`, `{response}`, `{answer}`, `{reference}`) is sent as one user
turn through the model's chat template; the score is the probability of a yes token against
a no token at the first position of the reply:

    score = sum_y p(y) / (sum_y p(y) + sum_n p(n)),  y in `yes_words`, n in `no_words`

where each word counts through the first token of its spellings (`yes`, ` yes`, `Yes`,
` Yes`). No text is generated, so the score is deterministic and smooth.

Options: `model` (a registry name, a local folder or a run checkpoint; default
`smollm2-135m`), `rubric`, `batch_size` (8), `max_tokens` (1024: longer prompts keep their
end), `yes_words` / `no_words`.
"""

from __future__ import annotations

import functools
from typing import Any

from rollcli.rewards.judge.rubric import DEFAULT_YES_NO_RUBRIC, fill_rubric
from rollcli.rewards.registry import reward_options
from rollcli.rewards.runner import batch_reward


@functools.lru_cache(maxsize=2)
def load_judge(model: str) -> tuple[Any, Any]:
    """(model, tokenizer) for a model reference, loaded once per process."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rollcli.models.loading import resolve_model

    path = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    lm = AutoModelForCausalLM.from_pretrained(path)
    lm.eval()
    return lm, tokenizer


def word_token_ids(tokenizer: Any, words: list[str]) -> list[int]:
    """The first token of each spelling of each word (deduplicated)."""
    ids: list[int] = []
    for w in words:
        for spelling in {w, f" {w}", w.capitalize(), f" {w.capitalize()}"}:
            toks = tokenizer.encode(spelling, add_special_tokens=False)
            if toks and toks[0] not in ids:
                ids.append(toks[0])
    return ids


def judge_prompt(tokenizer: Any, text: str) -> str:
    """The rubric text as a chat turn with the generation prompt, or as-is without a template."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
    return text


def yes_probability(
    lm: Any,
    tokenizer: Any,
    texts: list[str],
    yes_ids: list[int],
    no_ids: list[int],
    max_tokens: int,
) -> list[float]:
    """P(yes) / (P(yes) + P(no)) at the next-token position of each text (one padded batch)."""
    import torch

    prompts = [judge_prompt(tokenizer, t) for t in texts]
    tokenizer.truncation_side = "left"
    enc = tokenizer(
        prompts,
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=max_tokens,
        add_special_tokens=False,
    )
    with torch.no_grad():
        mask = enc["attention_mask"]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = lm(input_ids=enc["input_ids"], attention_mask=mask, position_ids=positions).logits
    probs = torch.softmax(logits[:, -1, :].float(), dim=-1)
    yes = probs[:, yes_ids].sum(-1)
    no = probs[:, no_ids].sum(-1)
    return (yes / (yes + no).clamp(min=1e-12)).tolist()


@reward_options("model", "rubric", "batch_size", "max_tokens", "yes_words", "no_words")
@batch_reward
def local_judge_reward(
    samples: list[dict[str, Any]],
    *,
    model: str = "smollm2-135m",
    rubric: str = DEFAULT_YES_NO_RUBRIC,
    batch_size: int = 8,
    max_tokens: int = 1024,
    yes_words: tuple[str, ...] | list[str] = ("yes",),
    no_words: tuple[str, ...] | list[str] = ("no",),
    **_: Any,
) -> list[dict[str, Any]]:
    """Each sample's yes-probability under the local judge model, in [0, 1]."""
    lm, tokenizer = load_judge(model)
    yes_ids = word_token_ids(tokenizer, list(yes_words))
    no_ids = word_token_ids(tokenizer, list(no_words))
    shared = set(yes_ids) & set(no_ids)  # e.g. a bare space token: it says neither
    yes_ids = [i for i in yes_ids if i not in shared]
    no_ids = [i for i in no_ids if i not in shared]
    if not yes_ids or not no_ids:
        raise ValueError(f"the judge's tokenizer cannot tell {yes_words} from {no_words}")
    texts = [fill_rubric(rubric, s) for s in samples]
    scores: list[float] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        scores += yes_probability(lm, tokenizer, chunk, yes_ids, no_ids, max_tokens)
    return [{"score": s, "judge_yes": s} for s in scores]
