"""A reward that cannot run must stop what uses it, not read as zeros.

Scored samples are checked after scoring (a training step's, validation's, `roll eval`'s):
when every one of them carries an `error` (the reward raised, timed out or returned
something that is not a score), `RewardFailedError` stops the command with one line naming
the reward and the first error; when some do, a warning says how many. Failing programs,
wrong answers and the like are not errors: only samples the reward could not score are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

WARN_FRACTION = 0.5  # a training step warns past this share of failed samples


class RewardFailedError(RuntimeError):
    """Every sample failed to score: the reward cannot run."""


def reward_errors(rows: Sequence[dict[str, Any]]) -> tuple[int, str | None]:
    """(how many rows have an `error`, the first one's first line).

    >>> reward_errors([{"error": None}, {"error": "KeyError: 'x'\\nmore"}, {"error": "y"}])
    (2, "KeyError: 'x'")
    """
    errors = [str(row["error"]) for row in rows if row.get("error")]
    if not errors:
        return 0, None
    first = errors[0].strip().splitlines()[0] if errors[0].strip() else errors[0]
    return len(errors), first


def check_reward_errors(
    reward: str,
    rows: Sequence[dict[str, Any]],
    where: str,
    warn: Callable[[str], None],
    warn_fraction: float = WARN_FRACTION,
) -> None:
    """Raise `RewardFailedError` if every row has an `error`; `warn` past `warn_fraction`
    of them. `where` says which samples these are (`at step 3`, `in validation`).

    >>> check_reward_errors("math", [{"error": None}, {"error": "boom"}], "at step 1", print)
    >>> check_reward_errors("math", [{"error": "x"}, {"error": "y"}, {}], "at step 2", print)
    warning: reward 'math' failed on 2 of 3 samples at step 2 (first: x)
    >>> check_reward_errors("my.mod:fn", [{"error": "TypeError: bad"}], "at step 3", print)
    Traceback (most recent call last):
    ...
    rollcli.rewards.failures.RewardFailedError: reward 'my.mod:fn' failed on every sample at step 3 (1 samples): TypeError: bad
    """
    count, first = reward_errors(rows)
    if not rows or not count:
        return
    if count == len(rows):
        raise RewardFailedError(
            f"reward {reward!r} failed on every sample {where} ({len(rows)} samples): {first}"
        )
    if count > warn_fraction * len(rows):
        warn(
            f"warning: reward {reward!r} failed on {count} of {len(rows)} samples {where} "
            f"(first: {first})"
        )
