"""Which isolation layers work on this machine, probed once per process."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

from . import cgroup

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")


@functools.lru_cache(maxsize=1)
def detect_isolation() -> dict[str, bool]:
    """Probe the kernel features the sandbox can use; cached for the process.

    Keys: ``root``, ``user_namespace``, ``net_namespace``, ``mount_namespace``,
    ``pid_namespace``, ``setuid_drop``, ``cgroup_pids``, ``cgroup_memory``,
    ``no_new_privs``, ``bwrap`` (installed; not used by this backend) and
    ``seccomp`` (not implemented, always False). ``strong`` is True when the
    network and filesystem are both isolated, the default requirement.
    """
    layers = {
        "root": False,
        "user_namespace": False,
        "net_namespace": False,
        "mount_namespace": False,
        "pid_namespace": False,
        "setuid_drop": False,
    }
    if sys.platform.startswith("linux"):
        try:
            out = subprocess.run(
                [sys.executable, "-I", "-S", "-B", LAUNCHER, "--probe"],
                capture_output=True,
                text=True,
                timeout=20,
                env={},
            )
            layers.update(json.loads(out.stdout))
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    group = cgroup.create(8, 64 << 20)
    layers["cgroup_pids"] = group is not None
    layers["cgroup_memory"] = group is not None and "memory" in group.controllers
    if group is not None:
        group.destroy()
    layers["no_new_privs"] = sys.platform.startswith("linux")
    layers["bwrap"] = shutil.which("bwrap") is not None
    layers["seccomp"] = False
    layers["strong"] = layers["net_namespace"] and layers["mount_namespace"]
    return layers


def isolation_summary(layers: dict[str, bool] | None = None) -> str:
    """One line saying what is in force, for logs and ``roll doctor``."""
    layers = detect_isolation() if layers is None else layers
    used = [k for k, v in layers.items() if v and k not in ("root", "strong", "bwrap")]
    if layers["strong"]:
        return "sandbox: strong isolation (" + ", ".join(used) + ")"
    return (
        "sandbox: WEAK isolation, no network/mount namespaces here: programs can "
        "read world-readable host files and reach the network; only rlimits, a "
        "clean environment and a temp folder apply (" + ", ".join(used) + ")"
    )
