"""Reward functions that misbehave on purpose, deterministically (by a hash of the response).

Imported by reward workers through `reward.fn=faulty_rewards:flaky` with this folder on
PYTHONPATH.
"""

from __future__ import annotations

import time
import zlib


def kind(response: str) -> str:
    """What `flaky` does with this response: raise, hang or score."""
    return ("raise", "hang", "score", "score")[zlib.crc32(response.encode()) % 4]


def flaky(response: str, answer: str, **_: object) -> float:
    what = kind(response)
    if what == "raise":
        raise ValueError("flaky reward refuses this response")
    if what == "hang":
        time.sleep(30)  # far past reward.timeout_s
    return (zlib.crc32(response.encode()) % 3) / 2
