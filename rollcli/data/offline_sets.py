"""Data sets of the offline pipelines: chat examples (sft, distill) and preference pairs
(dpo), each a train and a held-out validation split, tokenized once at setup."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from rollcli.config.data_section import DataConfig
from rollcli.data.chat import (
    ChatExample,
    chat_examples_from_rows,
    examples_from_prompts,
    tokenize_chat,
)
from rollcli.data.columns import Columns
from rollcli.data.dataset_rows import Source, read_table
from rollcli.data.overlong import keep_fitting, overlong_note
from rollcli.data.packing import Sample
from rollcli.data.pairs import PreferencePair, pair_ids, pairs_from_rows, verifiable_pairs
from rollcli.data.prompt_sets import (
    GENERATED_VAL_SIZE,
    VAL_SEED_OFFSET,
    load_prompt_sets,
    seeded_sample,
    train_source,
    val_source,
)
from rollcli.data.prompts import DataError

TokenizedPair = tuple[list[int], list[int], list[int]]  # prompt, chosen, rejected ids


def load_chat_sets(data: DataConfig, seed: int) -> tuple[list[ChatExample], list[ChatExample]]:
    """(train, validation) conversations: from the dataset at `data.path` (validation from
    `val_split` / `val_path`, a seeded sample of `val_size` when set, else the last
    `val_size` rows), or generated problems answered by their generator."""
    if data.source == "file":
        columns = Columns.of(data)

        def read(source: Source) -> list[ChatExample]:
            rows, names = read_table(source, columns.names())
            mapped = replace(columns, available=names)
            return chat_examples_from_rows(rows, _where(source), data.system_prompt, mapped)

        return _split(read, data, seed)
    train, val = load_prompt_sets(data, seed)
    return examples_from_prompts(train), examples_from_prompts(val)


def load_pair_sets(
    data: DataConfig, seed: int
) -> tuple[list[PreferencePair], list[PreferencePair], int]:
    """(train, validation, rows skipped) preference pairs: from the dataset at `data.path`
    (see `rollcli.data.pairs`), or generated problems with a correct and a wrong answer."""
    if data.source == "file":
        columns = Columns.of(data)
        skipped = 0

        def read(source: Source) -> list[PreferencePair]:
            nonlocal skipped
            rows, names = read_table(source, columns.names())
            mapped = replace(columns, available=names)
            pairs, n = pairs_from_rows(rows, _where(source), data.system_prompt, mapped)
            skipped += n
            return pairs

        train, val = _split(read, data, seed)
        return train, val, skipped
    prompts, val_prompts = load_prompt_sets(data, seed)
    return verifiable_pairs(prompts, seed), verifiable_pairs(val_prompts, seed + 1), 0


T = TypeVar("T")


def _split(
    read: Callable[[Source], list[T]], data: DataConfig, seed: int
) -> tuple[list[T], list[T]]:
    """(train, validation) items of a dataset: validation from its own split or file (a
    seeded sample of `data.val_size` when set), else the last `val_size` items (default
    256) held out of training; a seeded sample of `data.train_size` when set."""
    train = read(train_source(data))
    held = val_source(data)
    if held is None:
        train, val = hold_out_last(train, data.val_size or GENERATED_VAL_SIZE, str(data.path))
    else:
        val = read(held)
        if data.val_size is not None and len(val) > data.val_size:
            val = seeded_sample(val, data.val_size, seed + VAL_SEED_OFFSET)
    if data.train_size is not None and len(train) > data.train_size:
        picked = set(seeded_sample(list(range(len(train))), data.train_size, seed))
        train = [item for i, item in enumerate(train) if i in picked]
    return train, val


def hold_out_last(rows: list[T], val_size: int, source: str) -> tuple[list[T], list[T]]:
    """(train, validation): the last `val_size` rows are held out."""
    if len(rows) <= val_size:
        raise DataError(
            f"{source} has {len(rows)} usable rows, not more than data.val_size = {val_size}: "
            "lower data.val_size, or give data.val_split or data.val_path"
        )
    return rows[:-val_size], rows[-val_size:]


def _where(source: Source) -> str:
    return f"{source.key} ({source.describe()})"


def tokenize_chats(
    tokenizer: Any,
    examples: list[ChatExample],
    max_tokens: int,
) -> tuple[list[Sample], int]:
    """Token ids and loss masks of every example, and how many were cut to `max_tokens`.
    An example left with no assistant token after the cut is an error."""
    samples, cut = [], 0
    for ex in examples:
        ids, mask, truncated = tokenize_chat(tokenizer, ex.messages, max_tokens)
        if not any(mask[1:]):
            raise DataError(
                f"example {ex.id!r}: no assistant token is left within {max_tokens} tokens; "
                "raise the pipeline's max_tokens"
            )
        samples.append((ids, mask))
        cut += int(truncated)
    return samples, cut


def fit_chats(
    tokenizer: Any,
    examples: list[ChatExample],
    max_tokens: int,
    *,
    overlong: str,
    what: str,
    key: str,
) -> tuple[list[ChatExample], list[Sample], int, str | None]:
    """(the examples with a reply token within `max_tokens`, their token ids and loss
    masks cut to it, how many were cut, the note of what was left out or None): the
    overlong rule of `rollcli.data.overlong`, where an example's length is the tokens
    before its first reply token (`key` names the setting, e.g. `sft.max_tokens`)."""
    full = [tokenize_chat(tokenizer, ex.messages, 1 << 30)[:2] for ex in examples]
    before_reply = [_first_trained(mask) for _, mask in full]
    ids = [ex.id for ex in examples]
    kept = keep_fitting(ids, before_reply, max_tokens - 1, mode=overlong, what=what, key=key)
    samples = [(full[i][0][:max_tokens], full[i][1][:max_tokens]) for i in kept]
    cut = sum(len(full[i][0]) > max_tokens for i in kept)
    dropped = len(examples) - len(kept)
    note = (
        f"{dropped:,} of {len(examples):,} {what} with no reply token within {key} = "
        f"{max_tokens} left out"
    )
    return [examples[i] for i in kept], samples, cut, note if dropped else None


def _first_trained(mask: list[int]) -> int:
    """Tokens before the first trained one (a sample without one: all of it)."""
    return next((i for i, m in enumerate(mask) if m and i > 0), len(mask))


def tokenize_pairs(
    tokenizer: Any,
    pairs: list[PreferencePair],
    max_prompt_tokens: int,
    max_response_tokens: int,
    what: str,
    overlong: str = "drop",
) -> tuple[list[TokenizedPair], str | None]:
    """Token ids of the pairs whose prompt fits `max_prompt_tokens` (the overlong rule of
    `rollcli.data.overlong`), and the note of what was left out or None."""
    out = [pair_ids(tokenizer, p, max_response_tokens) for p in pairs]
    lengths = [len(prompt) for prompt, _, _ in out]
    label = f"{what} pairs"
    kept = keep_fitting(
        [p.id for p in pairs], lengths, max_prompt_tokens, mode=overlong, what=label
    )
    dropped = len(pairs) - len(kept)
    note = overlong_note(dropped, len(pairs), max_prompt_tokens, label, "data.max_prompt_tokens")
    return [out[i] for i in kept], note if dropped else None


def generation_prompts(
    tokenizer: Any,
    examples: list[ChatExample],
) -> tuple[list[ChatExample], list[list[int]]]:
    """The examples that carry a reference answer, and their prompts' token ids (with the
    generation prompt) for answering them."""
    with_answer = [ex for ex in examples if ex.answer is not None]
    return with_answer, prompt_ids(tokenizer, with_answer)


def prompt_ids(tokenizer: Any, examples: list[ChatExample]) -> list[list[int]]:
    """Each example's prompt (the turns before its last answer) as token ids, with the
    generation prompt: what a model is asked."""
    ids = []
    for ex in examples:
        out = tokenizer.apply_chat_template(
            list(ex.prompt_messages), add_generation_prompt=True, tokenize=True
        )
        ids.append(list(out["input_ids"] if hasattr(out, "keys") else out))
    return ids


def with_answers(examples: list[ChatExample], answers: list[str]) -> list[ChatExample]:
    """The examples with their last answer replaced by `answers` (another model's), for
    sequence-level distillation."""
    return [
        replace(ex, messages=(*ex.prompt_messages, {"role": "assistant", "content": text}))
        for ex, text in zip(examples, answers, strict=True)
    ]
