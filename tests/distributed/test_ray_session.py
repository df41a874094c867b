"""A local run starts a Ray session of its own, even when this machine has another cluster
(Ray records the last cluster it started in `$RAY_TMPDIR/ray/ray_current_cluster`, and a
plain `ray.init()` tries to join that one)."""

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


def test_local_session_ignores_another_cluster_on_the_machine():
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # short: Ray's socket paths
    (ray_tmp / "ray").mkdir()
    # another cluster's record (its address is dead: joining it could only fail)
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(ray_tmp)
    try:
        res = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "cpus 1.0" in res.stdout
