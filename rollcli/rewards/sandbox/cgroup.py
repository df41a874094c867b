"""A throw-away cgroup per run: caps processes and memory, kills every member.

Works with cgroup v1 (one hierarchy per controller) and v2 (one unified tree)
wherever this process may create a child of its own cgroup: as root, or
under a delegated systemd slice. Everything here fails soft: when no cgroup
can be made, :func:`create` returns ``None`` and the sandbox relies on rlimits.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass

_ROOT = "/sys/fs/cgroup"


@dataclass
class RunCgroup:
    dirs: list[str]
    controllers: tuple[str, ...]

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def members(self) -> set[int]:
        pids: set[int] = set()
        for path in self.procs_files:
            try:
                with open(path) as f:
                    pids.update(int(x) for x in f.read().split())
            except OSError:
                pass
        return pids

    def oom_killed(self) -> bool:
        for d in self.dirs:
            for name in ("memory.oom_control", "memory.events"):
                try:
                    with open(os.path.join(d, name)) as f:
                        for line in f:
                            key, _, value = line.partition(" ")
                            if key == "oom_kill" and int(value) > 0:
                                return True
                except OSError:
                    continue
        return False

    def destroy(self, timeout_s: float = 3.0) -> bool:
        """Kill every member, then remove the cgroup; True when nothing is left."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.members()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if not left:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        for d in self.dirs:
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        return True


def _own_paths() -> dict[str, str]:
    """controller name (or '' for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                out[name] = path
    return out


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def create(max_processes: int, memory_bytes: int | None) -> RunCgroup | None:
    """Make a cgroup limiting pids (and memory, when ``memory_bytes`` is given)."""
    try:
        own = _own_paths()
    except OSError:
        return None
    name = "roll-sandbox-" + secrets.token_hex(6)
    made: list[str] = []
    controllers: list[str] = []
    try:
        if "pids" in own and os.path.isdir(f"{_ROOT}/pids"):
            for ctrl in ("pids", "memory"):
                if ctrl == "memory" and (memory_bytes is None or ctrl not in own):
                    continue
                d = f"{_ROOT}/{ctrl}{own[ctrl].rstrip('/')}/{name}"
                os.mkdir(d)
                made.append(d)
                if ctrl == "pids":
                    _write(f"{d}/pids.max", str(max_processes))
                else:
                    _write(f"{d}/memory.limit_in_bytes", str(memory_bytes))
                    if os.path.exists(f"{d}/memory.memsw.limit_in_bytes"):
                        _write(f"{d}/memory.memsw.limit_in_bytes", str(memory_bytes))
                controllers.append(ctrl)
        elif "" in own and os.path.exists(f"{_ROOT}/cgroup.controllers"):
            d = f"{_ROOT}{own[''].rstrip('/')}/{name}"
            os.mkdir(d)
            made.append(d)
            if os.path.exists(f"{d}/pids.max"):
                _write(f"{d}/pids.max", str(max_processes))
                controllers.append("pids")
            if memory_bytes is not None and os.path.exists(f"{d}/memory.max"):
                _write(f"{d}/memory.max", str(memory_bytes))
                if os.path.exists(f"{d}/memory.swap.max"):
                    _write(f"{d}/memory.swap.max", "0")
                controllers.append("memory")
        if "pids" not in controllers:
            raise OSError("no pids controller")
    except OSError:
        for d in made:
            with contextlib.suppress(OSError):
                os.rmdir(d)
        return None
    return RunCgroup(made, tuple(controllers))
