"""Prompt sets for RLVR: train and a fixed, disjoint held-out validation split."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from rollcli.config.data_section import DATASET_KEYS, DataConfig
from rollcli.data.columns import Columns
from rollcli.data.dataset_prompts import dataset_prompts
from rollcli.data.dataset_rows import RowSample, Source
from rollcli.data.overlong import keep_fitting, overlong_note
from rollcli.data.prompts import (
    DataError,
    Prompt,
    humaneval_prompts,
    ifeval_prompts,
    reasoning_gym_prompts,
)

VAL_SEED_OFFSET = 1_000_003
# generated sources (and a slice held out of a dataset): their sizes when unset
GENERATED_TRAIN_SIZE = 2000
GENERATED_VAL_SIZE = 256
# a generated validation set draws at most this many times data.val_size problems to find
# data.val_size distinct ones
MAX_DRAW_FACTOR = 16
# HumanEval's held-out split is fixed (whatever the run's seed): this permutation's first
# data.val_size problems.
HUMANEVAL_SPLIT_SEED = 0


def load_prompt_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """(train, validation). Validation holds distinct problems (by prompt text) and training
    holds none of them."""
    sets = load_prompt_data(data, seed)
    return sets.train, sets.val


@dataclass(frozen=True)
class PromptSets:
    train: list[Prompt]
    val: list[Prompt]
    notes: tuple[str, ...] = ()  # what was left out or sampled, for the run's events


def load_prompt_data(
    data: DataConfig, seed: int, reward_columns: Collection[str] = ()
) -> PromptSets:
    """The prompt sets of `data` and what reading them left out; a dataset's prompts carry
    the `reward_columns` their rows have."""
    if data.source == "file":
        return _file_sets(data, seed, reward_columns)
    if data.source == "mix":
        return PromptSets(*_mix_sets(data, seed, reward_columns))
    if data.source in EXTRA_SOURCES:
        return PromptSets(*EXTRA_SOURCES[data.source](data, seed))
    val = _reasoning_gym_val(data, seed)
    kwargs: dict[str, Any] = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    size = data.train_size or GENERATED_TRAIN_SIZE
    train = reasoning_gym_prompts(data.task, data.task_args, size, seed, **kwargs)
    return PromptSets(_without(train, val, "raise data.train_size or widen data.task_args"), val)


def check_generated(data: DataConfig, seed: int) -> None:
    """Raise what drawing the validation problems of a generated source (or of each
    generated `data.mix` domain) would, before anything starts: a generator with fewer
    distinct problems than `data.val_size` asks (rlvr-math's two-digit sums have ~8,100)
    was refused only once the workers ran, where a dataset's size is refused when it is
    read (`_file_sets`). The same draws as the run's, so the two agree."""
    if data.source == "mix":
        for domain, sub, _ in _mix_domains(data):
            if sub.source != "file":
                with _in_domain(domain):
                    check_generated(sub, seed)
    elif data.source == "reasoning_gym":
        _reasoning_gym_val(data, seed)
    elif data.source == "ifeval":
        _ifeval_val(data, seed)
    elif data.source == "humaneval":
        _humaneval_val_size(data, len(humaneval_prompts()))


def _reasoning_gym_val(data: DataConfig, seed: int) -> list[Prompt]:
    kwargs: dict[str, Any] = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    return unique_draws(
        lambda size: reasoning_gym_prompts(
            data.task, data.task_args, size, seed + VAL_SEED_OFFSET, **kwargs
        ),
        data.val_size or GENERATED_VAL_SIZE,
        f"data.task = {data.task!r} with these data.task_args",
    )


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


def _file_sets(
    data: DataConfig, seed: int, reward_columns: Collection[str], at: str = "data."
) -> PromptSets:
    """A dataset's prompts: validation from `val_split` / `val_path` (its distinct prompts, a
    seeded sample of `val_size` of them when set), else the last `val_size` distinct
    prompts of training; training keeps the rows whose text is not in validation (a seeded
    sample of `train_size` of them when set)."""
    assert data.path is not None
    columns = Columns.of(data)
    kwargs: dict[str, Any] = dict(
        system_prompt=data.system_prompt, suffix=data.prompt_suffix, reward_columns=reward_columns
    )
    sample = row_sample(data, seed, at)
    train, unmatched = dataset_prompts(train_source(data, at), columns, **kwargs, sample=sample)
    notes = [_unmatched(unmatched, len(train) + unmatched, "training", data)] if unmatched else []
    if sample is not None:
        how = f"stratified by its column {sample.by!r}" if sample.by else "seeded"
        notes.insert(0, f"training: {sample.n:,} rows of {data.path}, {how} ({at}sample)")
    held = val_source(data, at)
    if held is not None:
        val_rows, unmatched = dataset_prompts(held, columns, **kwargs)
        if unmatched:
            notes.append(_unmatched(unmatched, len(val_rows) + unmatched, "validation", data))
        val = _distinct(val_rows)
        if data.val_size is not None and len(val) > data.val_size:
            notes.append(f"validation: a seeded sample of {data.val_size} of {len(val)} prompts")
            val = seeded_sample(val, data.val_size, seed + VAL_SEED_OFFSET)
        elif data.val_size is not None and len(val) < data.val_size:
            notes.append(
                f"validation: all {len(val)} prompts of {held.describe()}, fewer than "
                f"data.val_size = {data.val_size}"
            )
        train = _without(train, val, f"{data.path} holds only validation prompts")
    else:
        size = data.val_size or GENERATED_VAL_SIZE
        distinct = len(_distinct(train))
        if distinct <= size:
            raise DataError(
                f"{data.path} has {distinct} distinct prompts, not more than data.val_size = "
                f"{size}: lower data.val_size, or give data.val_split or data.val_path"
            )
        val = _distinct(train[::-1])[:size][::-1]
        train = _without(train, val, "lower data.val_size")
    if data.train_size is not None and len(train) > data.train_size:
        notes.append(f"training: a seeded sample of {data.train_size} of {len(train)} prompts")
        picked = set(seeded_sample(list(range(len(train))), data.train_size, seed))
        train = [p for i, p in enumerate(train) if i in picked]
    return PromptSets(train, val, tuple(notes))


def train_source(data: Any, at: str = "data.") -> Source:
    """Where a `data` section's (or, `at` its keys, a `data.mix` domain's) training rows are."""
    return Source(data.path, data.name, data.split, f"{at}path", f"{at}split")


def row_sample(data: Any, seed: int, at: str = "data.") -> RowSample | None:
    """The training rows' `sample` of a `data` section (or a `data.mix` domain)."""
    if data.sample is None:
        return None
    s = data.sample
    return RowSample(s.n, s.by, seed if s.seed is None else s.seed, f"{at}sample")


def val_source(data: Any, at: str = "data.") -> Source | None:
    """Where its validation rows are: `val_split` of `path`, or `val_path` (its
    `val_split`, default `train`); None when validation is held out of training."""
    if data.val_path is not None:
        name = data.name if data.val_path == data.path else None
        split = data.val_split or "train"
        return Source(data.val_path, name, split, f"{at}val_path", f"{at}val_split")
    if data.val_split is not None:
        return Source(data.path, data.name, data.val_split, f"{at}path", f"{at}val_split")
    return None


def seeded_sample(items: list[Any], size: int, seed: int) -> list[Any]:
    """The first `size` items of a seeded shuffle of `items` (a smaller size picks a
    prefix of the same order, so `roll eval --n` takes the start of a run's validation)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    return [items[i] for i in order[:size]]


def _unmatched(count: int, total: int, part: str, data: DataConfig) -> str:
    return (
        f"{part}: {count:,} of {total:,} rows left out: data.answer_pattern = "
        f"{data.answer_pattern!r} matches nothing in their answer"
    )


def _text(prompt: Prompt) -> tuple[str, ...]:
    return tuple(m["content"] for m in prompt.messages)


def prompt_ids(tokenizer: Any, prompt: Prompt) -> list[int]:
    """The chat-template token ids of a prompt, with the generation prompt."""
    ids = tokenizer.apply_chat_template(
        list(prompt.messages), add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def fit_prompts(
    tokenizer: Any,
    prompts: list[Prompt],
    limit: int,
    overlong: str = "drop",
    what: str = "prompts",
) -> tuple[list[Prompt], list[list[int]], str | None]:
    """(the prompts within `limit` tokens, their token ids, the note of what was left out
    or None): the overlong rule of `rollcli.data.overlong`."""
    ids = [prompt_ids(tokenizer, p) for p in prompts]
    kept = keep_fitting(
        [p.id for p in prompts], [len(i) for i in ids], limit, mode=overlong, what=what
    )
    dropped = len(prompts) - len(kept)
    note = overlong_note(dropped, len(prompts), limit, what, "data.max_prompt_tokens")
    return [prompts[i] for i in kept], [ids[i] for i in kept], note if dropped else None


def _humaneval_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    problems = humaneval_prompts(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    val_size = _humaneval_val_size(data, len(problems))
    random.Random(HUMANEVAL_SPLIT_SEED).shuffle(problems)
    val, train = problems[:val_size], problems[val_size:]
    return train[: data.train_size or GENERATED_TRAIN_SIZE], val


def _humaneval_val_size(data: DataConfig, problems: int) -> int:
    val_size = data.val_size or GENERATED_VAL_SIZE
    if val_size >= problems:
        raise DataError(
            f"data.val_size = {val_size} leaves no HumanEval problem for training "
            f"(there are {problems})"
        )
    return val_size


def _ifeval_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    kwargs: dict[str, Any] = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    val = _ifeval_val(data, seed)
    train = ifeval_prompts(data.train_size or GENERATED_TRAIN_SIZE, seed, **kwargs)
    return _without(train, val, "raise data.train_size"), val


def _ifeval_val(data: DataConfig, seed: int) -> list[Prompt]:
    kwargs: dict[str, Any] = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    return unique_draws(
        lambda size: ifeval_prompts(size, seed + VAL_SEED_OFFSET, **kwargs),
        data.val_size or GENERATED_VAL_SIZE,
        "the ifeval generator",
    )


def _mix_sets(
    data: DataConfig, seed: int, reward_columns: Collection[str] = ()
) -> tuple[list[Prompt], list[Prompt]]:
    """Each domain's sets, sized by ratio and tagged with the domain's name. A domain with
    fewer training prompts than its share repeats them, so the pool keeps the ratios (the
    sampler draws uniformly from the pool)."""
    train: list[Prompt] = []
    val: list[Prompt] = []
    for domain, sub, n_train in _mix_domains(data):
        with _in_domain(domain):
            d_train, d_val = (
                _mix_file(sub, seed, reward_columns, domain)
                if sub.source == "file"
                else load_prompt_sets(sub, seed)
            )
        for i in range(n_train):
            p = d_train[i % len(d_train)]
            repeat = f"#{i // len(d_train)}" if i >= len(d_train) else ""
            train.append(replace(p, id=f"{domain}/{p.id}{repeat}", tag=domain))
        val += [replace(p, id=f"{domain}/{p.id}", tag=domain) for p in d_val]
    return train, val


def _mix_domains(data: DataConfig) -> list[tuple[str, DataConfig, int]]:
    """Each `data.mix` domain as a `data` section of its own, sized by its ratio (at least
    one prompt each), with its share of the training prompts."""
    total = sum(d.ratio for d in data.mix.values())
    train_size = data.train_size or GENERATED_TRAIN_SIZE
    val_size = data.val_size or GENERATED_VAL_SIZE
    domains = []
    for domain, d in data.mix.items():
        n_train = max(1, round(train_size * d.ratio / total))
        n_val = max(1, round(val_size * d.ratio / total))
        dataset = {k: getattr(d, k) for k in DATASET_FIELDS} if d.source == "file" else {}
        with _in_domain(domain):
            sub = DataConfig(
                source=d.source,
                task=d.task,
                task_args=d.task_args,
                train_size=n_train,
                val_size=n_val,
                system_prompt=data.system_prompt,
                prompt_suffix=d.prompt_suffix or data.prompt_suffix,
                max_prompt_tokens=data.max_prompt_tokens,
                **dataset,
            )
        domains.append((domain, sub, n_train))
    return domains


@contextmanager
def _in_domain(domain: str) -> Iterator[None]:
    """A data error of a mix domain names it (`data.mix.NAME: ...`), once."""
    try:
        yield
    except DataError as exc:
        named = str(exc).startswith((f"data.mix.{domain}.", f"data.mix.{domain}:"))
        raise DataError(str(exc) if named else f"data.mix.{domain}: {exc}") from None


def _mix_file(
    sub: DataConfig, seed: int, reward_columns: Collection[str], domain: str
) -> tuple[list[Prompt], list[Prompt]]:
    sets = _file_sets(sub, seed, reward_columns, at=f"data.mix.{domain}.")
    return sets.train, sets.val


DATASET_FIELDS = ("path", *DATASET_KEYS)


EXTRA_SOURCES = {"humaneval": _humaneval_sets, "ifeval": _ifeval_sets, "mix": _mix_sets}
