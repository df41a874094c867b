"""Prompts longer than a pipeline allows: one rule for every pipeline.

rlvr and dpo allow `data.max_prompt_tokens` prompt tokens (chat template and generation
prompt included); sft and distill cut each sample at their `max_tokens` and need its first
reply token within it. With `data.overlong: drop` (the default) a longer item is left out
and counted (the run's events and start summary say how many); with `error` the first one
is an error naming its id and length. Nothing left is an error naming the key to raise.
"""

from __future__ import annotations

from collections.abc import Sequence

from rollcli.data.prompts import DataError


def keep_fitting(
    ids: Sequence[str],
    lengths: Sequence[int],
    limit: int,
    *,
    mode: str,
    what: str,
    key: str = "data.max_prompt_tokens",
) -> list[int]:
    """The indices of the items whose length is at most `limit`; `what` names them in
    messages ("training prompts"), `key` is the setting that bounds them.

    >>> keep_fitting(["a", "b", "c"], [10, 300, 20], 256, mode="drop", what="prompts")
    [0, 2]
    """
    kept = [i for i, n in enumerate(lengths) if n <= limit]
    if mode == "error" and len(kept) < len(lengths):
        first = next(i for i, n in enumerate(lengths) if n > limit)
        over = len(lengths) - len(kept)
        raise DataError(
            f"{over:,} of {len(lengths):,} {what} are over {key} = {limit} tokens (the first, "
            f"{ids[first]!r}, has {lengths[first]}); raise {key}, or set data.overlong=drop "
            "to leave them out"
        )
    if lengths and not kept:
        raise DataError(
            f"all {len(lengths):,} {what} are over {key} = {limit} tokens (the shortest has "
            f"{min(lengths)}); raise {key}"
        )
    return kept


def overlong_note(dropped: int, total: int, limit: int, what: str, key: str) -> str:
    """The line a run logs for what `keep_fitting` left out.

    >>> overlong_note(12, 7473, 256, "prompts", "data.max_prompt_tokens")
    '12 of 7,473 prompts over 256 tokens left out (data.max_prompt_tokens)'
    """
    return f"{dropped:,} of {total:,} {what} over {limit} tokens left out ({key})"
