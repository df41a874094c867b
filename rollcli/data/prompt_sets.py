"""Prompt sets for RLVR: train and a fixed, disjoint held-out validation split."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from rollcli.config.data_section import DataConfig
from rollcli.data.prompts import (
    DataError,
    Prompt,
    file_prompts,
    humaneval_prompts,
    ifeval_prompts,
    reasoning_gym_prompts,
)

VAL_SEED_OFFSET = 1_000_003
# a generated validation set draws at most this many times data.val_size problems to find
# data.val_size distinct ones
MAX_DRAW_FACTOR = 16
# HumanEval's held-out split is fixed (whatever the run's seed): this permutation's first
# data.val_size problems.
HUMANEVAL_SPLIT_SEED = 0


def load_prompt_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """(train, validation). Validation holds `data.val_size` distinct problems (by prompt
    text) and training holds none of them."""
    if data.source in EXTRA_SOURCES:
        return EXTRA_SOURCES[data.source](data, seed)
    if data.source == "file":
        return _file_sets(data)
    kwargs = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    val = unique_draws(
        lambda size: reasoning_gym_prompts(
            data.task, data.task_args, size, seed + VAL_SEED_OFFSET, **kwargs
        ),
        data.val_size,
        f"data.task = {data.task!r} with these data.task_args",
    )
    train = reasoning_gym_prompts(data.task, data.task_args, data.train_size, seed, **kwargs)
    return _without(train, val, "raise data.train_size or widen data.task_args"), val


def unique_draws(draw: Callable[[int], list[Prompt]], size: int, what: str) -> list[Prompt]:
    """The first `size` distinct prompts (by text) of a seeded generator, where `draw(m)` gives
    its first `m` problems: draws double until `size` distinct ones exist, or fail once a
    doubling finds nothing new (or after MAX_DRAW_FACTOR x `size` draws)."""
    m, seen = size, 0
    while True:
        prompts = _distinct(draw(m))
        if len(prompts) >= size:
            return prompts[:size]
        if len(prompts) == seen or m >= MAX_DRAW_FACTOR * size:
            raise DataError(
                f"{what} has only {len(prompts)} distinct problems in {m} draws, fewer than "
                f"data.val_size = {size}: lower data.val_size or widen the task"
            )
        m, seen = 2 * m, len(prompts)


def _distinct(prompts: list[Prompt]) -> list[Prompt]:
    texts: set[tuple[str, ...]] = set()
    out = []
    for p in prompts:
        if _text(p) not in texts:
            texts.add(_text(p))
            out.append(p)
    return out


def _without(train: list[Prompt], val: list[Prompt], hint: str) -> list[Prompt]:
    """`train` less every prompt whose text is a validation prompt's."""
    held_out = {_text(p) for p in val}
    kept = [p for p in train if _text(p) not in held_out]
    if not kept:
        raise DataError(f"every training prompt also appears in validation; {hint}")
    return kept


def _file_sets(data: DataConfig) -> tuple[list[Prompt], list[Prompt]]:
    """A `val_path` file's distinct prompts, or the last `val_size` distinct prompts of the
    training file; training keeps the rows whose text is not in validation."""
    assert data.train_path is not None
    kwargs = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    train = file_prompts(data.train_path, **kwargs)
    if data.val_path:
        val = _distinct(file_prompts(data.val_path, **kwargs))
        return _without(train, val, f"{data.train_path} holds only validation prompts"), val
    distinct = len(_distinct(train))
    if distinct <= data.val_size:
        raise DataError(
            f"{data.train_path} has {distinct} distinct prompts, not more than "
            f"data.val_size = {data.val_size}: lower data.val_size or give data.val_path"
        )
    val = _distinct(train[::-1])[: data.val_size][::-1]
    return _without(train, val, "lower data.val_size"), val


def _text(prompt: Prompt) -> tuple[str, ...]:
    return tuple(m["content"] for m in prompt.messages)


def tokenize_prompts(tokenizer, prompts: list[Prompt], max_tokens: int) -> list[list[int]]:  # noqa: ANN001
    """Chat-template token ids of each prompt; too-long prompts are an error, not a silent cut."""
    out = []
    for p in prompts:
        ids = tokenizer.apply_chat_template(
            list(p.messages), add_generation_prompt=True, tokenize=True
        )
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if len(ids) > max_tokens:
            raise DataError(
                f"prompt {p.id!r} has {len(ids)} tokens, more than data.max_prompt_tokens = {max_tokens}"
            )
        out.append(list(ids))
    return out


def _humaneval_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    problems = humaneval_prompts(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    if data.val_size >= len(problems):
        raise DataError(
            f"data.val_size = {data.val_size} leaves no HumanEval problem for training "
            f"(there are {len(problems)})"
        )
    random.Random(HUMANEVAL_SPLIT_SEED).shuffle(problems)
    val, train = problems[: data.val_size], problems[data.val_size :]
    return train[: data.train_size], val


def _ifeval_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    kwargs = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    val = unique_draws(
        lambda size: ifeval_prompts(size, seed + VAL_SEED_OFFSET, **kwargs),
        data.val_size,
        "the ifeval generator",
    )
    train = ifeval_prompts(data.train_size, seed, **kwargs)
    return _without(train, val, "raise data.train_size"), val


def _mix_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """Each domain's sets, sized by ratio and tagged with the domain's name. A domain with
    fewer training prompts than its share repeats them, so the pool keeps the ratios (the
    sampler draws uniformly from the pool)."""
    total = sum(d.ratio for d in data.mix.values())
    train: list[Prompt] = []
    val: list[Prompt] = []
    for domain, d in data.mix.items():
        n_train = max(1, round(data.train_size * d.ratio / total))
        n_val = max(1, round(data.val_size * d.ratio / total))
        sub = DataConfig(
            source=d.source,
            task=d.task,
            task_args=d.task_args,
            train_path=d.train_path,
            val_path=d.val_path,
            train_size=n_train,
            val_size=n_val,
            system_prompt=data.system_prompt,
            prompt_suffix=d.prompt_suffix or data.prompt_suffix,
            max_prompt_tokens=data.max_prompt_tokens,
        )
        try:
            d_train, d_val = load_prompt_sets(sub, seed)
        except DataError as exc:
            raise DataError(f"data.mix.{domain}: {exc}") from None
        for i in range(n_train):
            p = d_train[i % len(d_train)]
            repeat = f"#{i // len(d_train)}" if i >= len(d_train) else ""
            train.append(replace(p, id=f"{domain}/{p.id}{repeat}", tag=domain))
        val += [replace(p, id=f"{domain}/{p.id}", tag=domain) for p in d_val]
    return train, val


EXTRA_SOURCES = {"humaneval": _humaneval_sets, "ifeval": _ifeval_sets, "mix": _mix_sets}
