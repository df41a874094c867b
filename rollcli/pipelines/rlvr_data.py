"""Prompt sets for RLVR: train and a fixed, disjoint held-out validation split."""

from __future__ import annotations

from rollcli.config.sections import DataConfig
from rollcli.data.prompts import DataError, Prompt, file_prompts, reasoning_gym_prompts

VAL_SEED_OFFSET = 1_000_003


def load_prompt_sets(data: DataConfig, seed: int) -> tuple[list[Prompt], list[Prompt]]:
    """(train, validation). Generated sets use different seeds and drop overlaps from train."""
    if data.source == "file":
        assert data.train_path is not None
        train = file_prompts(
            data.train_path, system_prompt=data.system_prompt, suffix=data.prompt_suffix
        )
        if data.val_path:
            val = file_prompts(
                data.val_path, system_prompt=data.system_prompt, suffix=data.prompt_suffix
            )
        else:  # hold out the last val_size rows
            if len(train) <= data.val_size:
                raise DataError(
                    f"{data.train_path} has {len(train)} rows, not more than data.val_size = {data.val_size}"
                )
            train, val = train[: -data.val_size], train[-data.val_size :]
        return train, val
    kwargs = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    val = reasoning_gym_prompts(
        data.task, data.task_args, data.val_size, seed + VAL_SEED_OFFSET, **kwargs
    )
    train = reasoning_gym_prompts(data.task, data.task_args, data.train_size, seed, **kwargs)
    held_out = {_text(p) for p in val}
    train = [p for p in train if _text(p) not in held_out]
    if not train:
        raise DataError(
            "every generated training prompt also appears in validation; raise data.train_size"
        )
    return train, val


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
