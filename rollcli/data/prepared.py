"""A pipeline's data as it trains on it: read, mapped, sampled, tokenized and filtered by
the overlong rule, with the notes of what was left out. Each is made once per run: the
launch makes it before Ray starts (so a data source that training would refuse stops the
run before anything starts), and the pipeline's setup gets the same objects back."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rollcli.config.data_section import DataConfig
from rollcli.data.chat import ChatExample
from rollcli.data.offline_sets import (
    TokenizedPair,
    fit_chats,
    load_chat_sets,
    load_pair_sets,
    tokenize_pairs,
)
from rollcli.data.packing import Sample
from rollcli.data.prompt_sets import fit_prompts, load_prompt_data
from rollcli.data.prompts import Prompt

T = TypeVar("T")
_LAST: dict[str, Any] = {}  # the one prepared data set of this process's run


@dataclass(frozen=True)
class PromptData:
    """rlvr: the prompts that train and validate, their token ids, the notes."""

    train: list[Prompt]
    val: list[Prompt]
    train_ids: list[list[int]]
    val_ids: list[list[int]]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class PairData:
    """dpo: tokenized preference pairs (prompt, chosen, rejected ids), the notes."""

    train: list[TokenizedPair]
    val: list[TokenizedPair]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ChatData:
    """sft and distill: the conversations kept, their ids and loss masks, the notes."""

    train: list[ChatExample]
    val: list[ChatExample]
    train_samples: list[Sample]
    val_samples: list[Sample]
    notes: tuple[str, ...]


def prompt_data(
    data: DataConfig, seed: int, tokenizer: Any, reward_columns: Collection[str] = ()
) -> PromptData:
    def make() -> PromptData:
        sets = load_prompt_data(data, seed, reward_columns)
        limit, mode = data.max_prompt_tokens, data.overlong
        train, train_ids, note = fit_prompts(tokenizer, sets.train, limit, mode, "training prompts")
        val, val_ids, val_note = fit_prompts(tokenizer, sets.val, limit, mode, "validation prompts")
        notes = (*sets.notes, *(n for n in (note, val_note) if n))
        return PromptData(train, val, train_ids, val_ids, notes)

    return _once(("prompts", data, seed, tokenizer, sorted(reward_columns)), make)


def pair_data(data: DataConfig, seed: int, tokenizer: Any, max_response_tokens: int) -> PairData:
    def make() -> PairData:
        train, val, skipped = load_pair_sets(data, seed)
        limits = (data.max_prompt_tokens, max_response_tokens)
        train_ids, note = tokenize_pairs(tokenizer, train, *limits, "training", data.overlong)
        val_ids, val_note = tokenize_pairs(tokenizer, val, *limits, "validation", data.overlong)
        unusable = (
            [f"{skipped:,} rows without a shared prompt and final replies skipped"]
            if skipped
            else []
        )
        notes = (*unusable, *(n for n in (note, val_note) if n))
        return PairData(train_ids, val_ids, notes)

    return _once(("pairs", data, seed, tokenizer, max_response_tokens), make)


def chat_data(data: DataConfig, seed: int, tokenizer: Any, max_tokens: int, key: str) -> ChatData:
    """`key` names the pipeline's `max_tokens` (`sft.max_tokens`, `distill.max_tokens`)."""

    def make() -> ChatData:
        train, val = load_chat_sets(data, seed)
        kwargs = dict(overlong=data.overlong, key=key)
        train, train_samples, cut, note = fit_chats(
            tokenizer, train, max_tokens, what="training conversations", **kwargs
        )
        val, val_samples, cut_val, val_note = fit_chats(
            tokenizer, val, max_tokens, what="validation conversations", **kwargs
        )
        cuts = (
            [f"{cut + cut_val:,} conversations cut to {key} = {max_tokens}"]
            if cut + cut_val
            else []
        )
        notes = (*cuts, *(n for n in (note, val_note) if n))
        return ChatData(train, val, train_samples, val_samples, notes)

    return _once(("chats", data, seed, tokenizer, max_tokens), make)


def _once(key: tuple[Any, ...], make: Callable[[], T]) -> T:
    """`make()`, or what it made for the same data settings, files, seed and tokenizer."""
    kind, data, seed, tokenizer, *rest = key
    text = repr((kind, data.model_dump_json(), _stamps(data), seed, _tokenizer_id(tokenizer), rest))
    if text not in _LAST:
        _LAST.clear()
        _LAST[text] = make()
    made: T = _LAST[text]
    return made


def _tokenizer_id(tokenizer: Any) -> tuple[Any, ...]:
    """What decides the token ids: the vocabulary, special tokens and chat template (a
    student copied from its teacher has the teacher's, at another path)."""
    return (
        type(tokenizer).__name__,
        len(tokenizer),
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        hash(getattr(tokenizer, "chat_template", None) or ""),
    )


def _stamps(data: DataConfig) -> list[tuple[str, float, int]]:
    """Size and modification time of the local files a data section reads (a file written
    again between two runs in one process is read again)."""
    paths = [
        data.path,
        data.val_path,
        *(p for d in data.mix.values() for p in (d.path, d.val_path)),
    ]
    out = []
    for path in filter(None, paths):
        local = Path(path).expanduser()
        if local.exists():
            stat = local.stat()
            out.append((str(local), stat.st_mtime, stat.st_size))
    return out
