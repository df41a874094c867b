"""`algorithm.router_replay`'s modes, importable without torch (the config layer reads it):
`off` (each forward routes by itself), `R3` (the trainer replays the experts the rollout
engine picked), `R2` (the update's later forwards replay the old policy's). What they do:
`models/moe_routing.py` and `strategies/routing_replay.py`."""

from __future__ import annotations

from typing import Literal

RouterReplay = Literal["off", "R2", "R3"]
