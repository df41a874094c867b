"""Data sets of the offline pipelines: chat examples (sft, distill) and preference pairs
(dpo), each a train and a held-out validation split, tokenized once at setup."""

from __future__ import annotations

from dataclasses import replace

from rollcli.config.data_section import DataConfig
from rollcli.data.chat import (
    ChatExample,
    chat_examples_from_rows,
    examples_from_prompts,
    tokenize_chat,
)
from rollcli.data.packing import Sample
from rollcli.data.pairs import PreferencePair, pairs_from_rows, tokenize_pair, verifiable_pairs
from rollcli.data.prompt_sets import load_prompt_sets
from rollcli.data.prompts import DataError
from rollcli.data.row_files import hold_out_last, read_rows

TokenizedPair = tuple[list[int], list[int], list[int]]  # prompt, chosen, rejected ids


def load_chat_sets(data: DataConfig, seed: int) -> tuple[list[ChatExample], list[ChatExample]]:
    """(train, validation) conversations: from `data.train_path` (and `val_path`, else the
    last `val_size` rows), or generated problems answered by their generator."""
    if data.source == "file":
        assert data.train_path is not None
        train = chat_examples_from_rows(
            read_rows(data.train_path), data.train_path, data.system_prompt
        )
        if data.val_path:
            val = chat_examples_from_rows(
                read_rows(data.val_path), data.val_path, data.system_prompt
            )
            return train, val
        return hold_out_last(train, data.val_size, data.train_path)
    train, val = load_prompt_sets(data, seed)
    return examples_from_prompts(train), examples_from_prompts(val)


def load_pair_sets(
    data: DataConfig, seed: int
) -> tuple[list[PreferencePair], list[PreferencePair], int]:
    """(train, validation, rows skipped) preference pairs: from files (see
    `rollcli.data.pairs`), or generated problems with a correct and a wrong answer."""
    if data.source == "file":
        assert data.train_path is not None
        train, skipped = pairs_from_rows(
            read_rows(data.train_path), data.train_path, data.system_prompt
        )
        if data.val_path:
            val, skipped_val = pairs_from_rows(
                read_rows(data.val_path), data.val_path, data.system_prompt
            )
            return train, val, skipped + skipped_val
        train, val = hold_out_last(train, data.val_size, data.train_path)
        return train, val, skipped
    train, val = load_prompt_sets(data, seed)
    return verifiable_pairs(train, seed), verifiable_pairs(val, seed + 1), 0


def tokenize_chats(
    tokenizer,  # noqa: ANN001
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


def tokenize_pairs(
    tokenizer,  # noqa: ANN001
    pairs: list[PreferencePair],
    max_prompt_tokens: int,
    max_response_tokens: int,
    what: str,
) -> tuple[list[TokenizedPair], int]:
    """Token ids of the pairs whose prompt fits `max_prompt_tokens`, and how many did not."""
    out = [tokenize_pair(tokenizer, p, max_prompt_tokens, max_response_tokens) for p in pairs]
    kept = [t for t in out if t is not None]
    if not kept:
        raise DataError(
            f"no {what} pair has a prompt within data.max_prompt_tokens = {max_prompt_tokens}; "
            "raise it"
        )
    return kept, len(out) - len(kept)


def generation_prompts(
    tokenizer,  # noqa: ANN001
    examples: list[ChatExample],
) -> tuple[list[ChatExample], list[list[int]]]:
    """The examples that carry a reference answer, and their prompts' token ids (with the
    generation prompt) for answering them."""
    with_answer = [ex for ex in examples if ex.answer is not None]
    return with_answer, prompt_ids(tokenizer, with_answer)


def prompt_ids(tokenizer, examples: list[ChatExample]) -> list[list[int]]:  # noqa: ANN001
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
