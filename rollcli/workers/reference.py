"""reference: a frozen copy of the initial policy; log-probs for the KL penalty
(`compute_logprobs`, the trained model's own: policy_logprobs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from rollcli.distributed.node_files import node_model_folder
from rollcli.strategies.device import pick_device
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.precision import torch_dtype
from rollcli.strategies.routing_replay import RouterReplay, set_router_replay
from rollcli.strategies.threads import set_threads
from rollcli.workers.policy_logprobs import PolicyLogprobs


@dataclass(frozen=True)
class ReferenceArgs:
    """`dtype`: of the weights, the plan's (bfloat16 on GPUs, float32 on the CPU);
    `num_gpus`: this rank's share of a GPU in the plan's placement (0: the CPU)."""

    model_path: str
    dtype: str = "float32"
    num_threads: int = 1
    num_gpus: float = 0.0
    router_replay: RouterReplay = "off"  # an MoE model's (`strategies/routing_replay.py`)


class ReferenceWorker(PolicyLogprobs):
    def __init__(self, args: ReferenceArgs) -> None:
        model_path = str(node_model_folder(args.model_path))  # on this node (a cluster: see docs)
        set_threads(args.num_threads)
        self.device = pick_device(args.num_gpus)
        self.model = load_causal_lm(
            model_path, train=False, device=self.device, dtype=torch_dtype(args.dtype)
        )
        set_router_replay(self.model, args.router_replay)
