"""A local run starts a Ray session of its own, even when this machine has another cluster
(Ray records the last cluster it started in `$RAY_TMPDIR/ray/ray_current_cluster`, and a
plain `ray.init()` tries to join that one); a process that started one ends it at exit
without Ray's graceful kill (its daemons block SIGTERM: each waited out a grace period)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """
from rollcli.distributed.ray_session import start_ray, stop_ray
print("cpus", start_ray(num_cpus=1).get("CPU"))
stop_ray()
"""


def _run_alone(script: str, other_cluster: bool = False) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter with a Ray temp folder of its own (short: Ray's
    socket paths); `other_cluster`: that folder records another cluster, whose address is
    dead (joining it could only fail)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))
    if other_cluster:
        (ray_tmp / "ray").mkdir()
        (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(ray_tmp)
    try:
        res = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def test_local_session_ignores_another_cluster_on_the_machine():
    assert "cpus 1.0" in _run_alone(SCRIPT, other_cluster=True).stdout


AT_EXIT = """
from ray._private.node import Node
from rollcli.distributed.ray_session import start_ray, stop_ray_at_exit

kill = Node.kill_all_processes
def recorded(self, *args, **kwargs):
    print("kill graceful", kwargs.get("allow_graceful"), flush=True)
    return kill(self, *args, **kwargs)
Node.kill_all_processes = recorded
start_ray(num_cpus=1)
stop_ray_at_exit()
print("started", flush=True)
"""


def test_a_session_started_here_is_killed_at_exit_without_the_grace_period():
    res = _run_alone(AT_EXIT)
    kills = [line for line in res.stdout.splitlines() if line.startswith("kill")]
    assert res.stdout.startswith("started") and kills[0] == "kill graceful False", res.stdout
