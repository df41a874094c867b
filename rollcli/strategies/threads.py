"""Give a worker exactly the threads of the cores it owns (oversubscription is the biggest
slowdown on small machines: two processes with 2 torch threads each on 2 cores ran
generation 20x slower here)."""

from __future__ import annotations

import os


def set_threads(num_threads: int) -> None:
    """Also silences library progress bars: workers log to the driver's terminal."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    num_threads = max(1, int(num_threads))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(num_threads)
    torch.set_num_threads(num_threads)
    torch.set_flush_denormal(True)  # denormal floats slow CPU matmuls many times over
