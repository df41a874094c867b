"""Rewards that cannot run, for `test_reward_failures.py` (imported by reward workers as
`reward.fn=broken_rewards:NAME` with this folder on PYTHONPATH)."""

from __future__ import annotations


def wrong_signature(response: str) -> float:  # the runner passes (response, answer, ...)
    return 1.0
