"""Rewards that cannot run, for `test_reward_failures.py` (imported by reward workers as
`reward.fn=broken_rewards:NAME` with this folder on PYTHONPATH)."""

from __future__ import annotations


def wrong_signature(response: str, answer: str, reference: str) -> float:  # no `reference`
    return 1.0


def fails_on_model_replies(response: str, answer: str, **_: object) -> float:
    """Scores the reference answer (so the checks before a run pass it, with a warning)
    and raises on any other reply."""
    if response.strip() != answer.strip():
        raise ValueError("cannot parse the reply")
    return 1.0


def fails_on_odd_answers(response: str, answer: str) -> float:
    """Raises on a reply other than the reference answer to a problem whose answer is odd."""
    if response.strip() != answer and int(answer) % 2:
        raise ValueError("odd")
    return 0.0
