"""Which split a generated layout belongs to, so validation maps never appear in training.

Small generated worlds repeat: 200 seeds of 3x3 FrozenLake give only 35 distinct maps, so
validation seeds and training seeds share maps unless the layouts themselves are split.
A layout's split is a fixed function of its text: one layout in `VALIDATION_SHARE` goes
to validation (a SHA-256 bucket of the layout key), the rest to training. An environment
built with ``layouts="train"`` (or ``"validation"``) draws maps until one of its split
comes up, so the two sets are disjoint whatever the seeds.

Example:
    >>> layout_split("SFF\\nFHF\\nFFG"), layout_split("SFF\\nFFH\\nFFG")
    ('train', 'validation')
"""

from __future__ import annotations

import hashlib
from typing import Literal

Split = Literal["train", "validation"]
LAYOUTS = ("all", "train", "validation")
VALIDATION_SHARE = 4  # one layout in four is a validation layout
MAX_DRAWS = 1000  # layouts drawn for one reset before giving up


def layout_split(key: str) -> Split:
    """The split of the layout whose key (its text) is `key`."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    bucket = int.from_bytes(digest[:8], "big") % VALIDATION_SHARE
    return "validation" if bucket == 0 else "train"
