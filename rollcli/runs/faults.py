"""Fault injection, to test that runs survive what real runs meet: `ROLL_INJECT_FAULT`.

    ROLL_INJECT_FAULT="kill@train:3"               SIGKILL the driver as step 3 starts training
    ROLL_INJECT_FAULT="kill@generate:2+0.5"        ... 0.5 s into step 2's generation
    ROLL_INJECT_FAULT="kill-worker@reward:2"       SIGKILL the reward worker's process at step 2
    ROLL_INJECT_FAULT="kill-worker@generate:2+0.3" SIGKILL an actor_infer process mid-generation
    ROLL_INJECT_FAULT="stale@sync:2"               step 2's weight sync leaves one tensor of
                                                   actor_infer's model stale (the check stops it)
    ROLL_INJECT_FAULT="router-noise@generate:2"    step 2's rollout perturbs which experts an
                                                   MoE model's routers pick (hf engine), as
                                                   kernel and precision differences do

Several faults are comma-separated. Points: generate, reward, forward, train, sync, validate,
checkpoint (the files are written, the folder not yet renamed). `kill-worker@POINT` kills the
first worker of the role that runs POINT, as the role table says (`Role.faults`,
`fault_roles`): at `generate` or `validate` actor_infer, at `reward` the reward worker, at
`forward` the reference or distill's teacher; a point no role of the run claims (`train`,
`sync`, `checkpoint`; `forward` with LoRA, ...) kills actor_train. Each fault fires once per
process. Nothing here runs unless the variable is set.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rollcli.planning.role_table import Role

ENV_VAR = "ROLL_INJECT_FAULT"
POINTS = ("generate", "reward", "forward", "train", "sync", "validate", "checkpoint")
ACTIONS = ("kill", "kill-worker", "stale", "router-noise")
_SPEC = re.compile(r"^(?P<action>[a-z-]+)@(?P<point>[a-z]+):(?P<step>\d+)(?:\+(?P<delay>[\d.]+))?$")


def fault_roles(roles: list[Role]) -> dict[str, str]:
    """Each point → the role whose first worker `kill-worker@POINT` kills: the role of
    `roles` that claims the point (`Role.faults`), else actor_train (the trained one).

    >>> from rollcli.planning.role_table import ACTOR_TRAIN, REWARD
    >>> fault_roles([ACTOR_TRAIN, REWARD])["reward"], fault_roles([ACTOR_TRAIN])["reward"]
    ('reward', 'actor_train')
    """
    claimed = {point: role.name for role in roles for point in role.faults}
    return {point: claimed.get(point, "actor_train") for point in POINTS}


class FaultSpecError(ValueError):
    pass


@dataclass(frozen=True)
class Fault:
    action: str
    point: str
    step: int
    delay_s: float = 0.0


def parse_faults(text: str) -> list[Fault]:
    """`"kill@train:3, kill-worker@reward:2+0.5"` → faults; a bad spec names what is wrong.

    >>> parse_faults("kill@train:3")
    [Fault(action='kill', point='train', step=3, delay_s=0.0)]
    """
    faults = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _SPEC.match(part)
        if not m:
            raise FaultSpecError(
                f"{ENV_VAR}: cannot read {part!r}; write ACTION@POINT:STEP[+SECONDS], "
                "e.g. kill@train:3"
            )
        if m["action"] not in ACTIONS:
            raise FaultSpecError(f"{ENV_VAR}: unknown action {m['action']!r}; one of {ACTIONS}")
        if m["point"] not in POINTS:
            raise FaultSpecError(f"{ENV_VAR}: unknown point {m['point']!r}; one of {POINTS}")
        faults.append(Fault(m["action"], m["point"], int(m["step"]), float(m["delay"] or 0)))
    return faults


class FaultInjector:
    """Fires the configured faults at `hit(point, step)`; `kill_worker(point)` kills a worker."""

    def __init__(self, faults: list[Fault], kill_worker: Callable[[str], None]) -> None:
        self.pending = list(faults)
        self.kill_worker = kill_worker

    @classmethod
    def from_env(cls, kill_worker: Callable[[str], None]) -> FaultInjector:
        return cls(parse_faults(os.environ.get(ENV_VAR, "")), kill_worker)

    def take(self, action: str, point: str, step: int) -> bool:
        """Whether a fault of `action` is due at `point` of `step` (then it is spent): for
        faults the caller carries out itself (`stale@sync:N`, `router-noise@generate:N`)."""
        due = [f for f in self.pending if (f.action, f.point, f.step) == (action, point, step)]
        for fault in due:
            self.pending.remove(fault)
        return bool(due)

    def hit(self, point: str, step: int) -> None:
        due = [f for f in self.pending if f.point == point and f.step == step]
        for fault in [f for f in due if f.action in ("kill", "kill-worker")]:
            self.pending.remove(fault)
            fire = self._action(fault)
            if fault.delay_s:
                threading.Timer(fault.delay_s, fire).start()
            else:
                fire()

    def _action(self, fault: Fault) -> Callable[[], None]:
        if fault.action == "kill":
            return lambda: os.kill(os.getpid(), signal.SIGKILL)
        return lambda: self.kill_worker(fault.point)
