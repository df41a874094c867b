"""reference: a frozen copy of the initial policy; log-probs for the KL penalty
(`compute_logprobs`, the trained model's own: policy_logprobs.py)."""

from __future__ import annotations

from rollcli.distributed.node_files import node_model_folder
from rollcli.strategies.device import pick_device
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.precision import torch_dtype
from rollcli.strategies.threads import set_threads
from rollcli.workers.policy_logprobs import PolicyLogprobs


class ReferenceWorker(PolicyLogprobs):
    def __init__(
        self,
        model_path: str,
        *,
        num_threads: int = 1,
        num_gpus: float = 0.0,
        dtype: str = "float32",
    ) -> None:
        """`dtype`: of the weights, the plan's (bfloat16 on GPUs, float32 on the CPU)."""
        model_path = str(node_model_folder(model_path))  # on this node (a cluster: see docs)
        set_threads(num_threads)
        self.device = pick_device(num_gpus)
        self.model = load_causal_lm(
            model_path, train=False, device=self.device, dtype=torch_dtype(dtype)
        )
