"""A reward that is 0 or 1 by a hash of the response, so that some groups of a random
model's samples agree (dynamic sampling drops them) and others differ.

Imported by reward workers through `reward.fn=coin_rewards:coin` with this folder on
PYTHONPATH.
"""

from __future__ import annotations

import zlib


def coin(response: str, answer: str, **_: object) -> float:
    return float(zlib.crc32(response.encode()) % 2)
