"""A reward that cannot run must stop the run, not train on zeros.

Each step's samples are checked after scoring: when every one of them carries an `error`
(the reward raised, timed out or returned garbage), the run stops with one line naming the
reward and the first error; when more than `WARN_FRACTION` of them do, a warning goes to
`events.log`. Failing programs, wrong answers and the like are not errors: only samples the
reward could not score are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

WARN_FRACTION = 0.5


class RewardFailedError(RuntimeError):
    """Every sample of a step failed to score: the reward cannot run."""


def check_reward_errors(
    reward: str, rows: Sequence[dict[str, Any]], step: int, log_event: Callable[[str], None]
) -> None:
    """Raise `RewardFailedError` if every row has an `error`; warn past `WARN_FRACTION`.

    >>> check_reward_errors("math", [{"error": None}, {"error": "boom"}], 1, print)
    >>> check_reward_errors("math", [{"error": "x"}, {"error": "y"}, {}], 2, print)
    warning: reward 'math' failed on 2 of 3 samples at step 2 (first: x)
    >>> check_reward_errors("my.mod:fn", [{"error": "TypeError: bad"}], 3, print)
    Traceback (most recent call last):
    ...
    rollcli.pipelines.rl.reward_health.RewardFailedError: reward 'my.mod:fn' failed on every sample at step 3 (1 samples): TypeError: bad
    """
    errors = [str(row["error"]) for row in rows if row.get("error")]
    if not rows or not errors:
        return
    first = errors[0].strip().splitlines()[0] if errors[0].strip() else errors[0]
    if len(errors) == len(rows):
        raise RewardFailedError(
            f"reward {reward!r} failed on every sample at step {step} ({len(rows)} samples): "
            f"{first}"
        )
    if len(errors) > WARN_FRACTION * len(rows):
        log_event(
            f"warning: reward {reward!r} failed on {len(errors)} of {len(rows)} samples at "
            f"step {step} (first: {first})"
        )
