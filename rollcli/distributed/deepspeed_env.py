"""Naming DeepSpeed's accelerator on a CPU run, before anything imports deepspeed.

DeepSpeed guesses its accelerator on import and, finding no GPU, warns "[real_accelerator.py]
Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect
it." Roll imports it itself (train.strategy: deepspeed), and transformers imports it from
`save_pretrained` / `from_pretrained` whenever it is installed: in the driver converting the
embedded model on a first run, and in every worker. On a CPU run that line is no news, so the
run names the CPU (`DS_ACCELERATOR=cpu`) in its own process before the first of these and its
Ray workers inherit it. A GPU run names nothing (DeepSpeed finds CUDA itself), a value the
user set is kept, and DeepSpeed's other warnings are untouched.
"""

from __future__ import annotations

import os


def name_cpu_accelerator(on_gpu: bool) -> None:
    """On a CPU run, `DS_ACCELERATOR=cpu` for this process and the ones it starts (unless set).

    >>> os.environ.pop("DS_ACCELERATOR", None) and None
    >>> name_cpu_accelerator(on_gpu=True); os.environ.get("DS_ACCELERATOR")
    >>> name_cpu_accelerator(on_gpu=False); os.environ["DS_ACCELERATOR"]
    'cpu'
    """
    if not on_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
