"""Whether this machine has the GPUs a run (`resources.gpus > 0`, `--gpus N`) asks for —
checked before anything starts.

What a GPU run may train in this build is `rollcli.config.capabilities`' answer, given when
the recipe loads (see docs/gpu.md). A local run (no `--ray-address`) needs `--gpus` GPUs
visible here and a torch built with CUDA; a run that joins a cluster is checked by Ray's
placement instead (the driver may have no GPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rollcli.config.errors import ConfigError

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig


def visible_gpu_count(env: Mapping[str, str] | None = None) -> int:
    """GPUs this process could use: `nvidia-smi -L`, narrowed by `CUDA_VISIBLE_DEVICES`
    when it is set (no torch import, no CUDA context)."""
    listed = len(nvidia_smi_gpus())
    cvd = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return listed
    chosen = [d for d in cvd.split(",") if d.strip() and d.strip() != "-1"]
    return min(listed, len(chosen))


def nvidia_smi_gpus() -> list[str]:
    """`nvidia-smi -L` lines, one per GPU of the machine (no torch import); empty without a
    driver. `roll doctor` prints them."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in res.stdout.splitlines() if line.startswith("GPU")]


def check_gpus_visible(cfg: RecipeConfig, visible: int | None = None) -> None:
    """A local GPU run needs its GPUs here and a CUDA build of torch; `visible` overrides
    the probe (tests)."""
    gpus = cfg.resources.gpus
    if gpus == 0 or cfg.resources.ray_address:
        return
    have = visible_gpu_count() if visible is None else visible
    if have < gpus:
        seen = "no CUDA GPU is visible" if have == 0 else f"only {have} CUDA GPU(s) are visible"
        raise ConfigError(
            f"--gpus {gpus}: {seen} on this machine (nvidia-smi -L, CUDA_VISIBLE_DEVICES); "
            "run on CPU with --gpus 0, or join a GPU cluster with --ray-address "
            "(`roll doctor` lists the GPUs it finds)"
        )
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"--gpus {gpus}: torch {torch.__version__} here cannot use CUDA (CUDA build: "
            f"{torch.version.cuda or 'no'}); install the CUDA build of torch matching the driver"
        )
