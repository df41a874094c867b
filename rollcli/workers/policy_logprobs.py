"""`compute_logprobs`, written once for the two workers that score responses under a policy:
actor_train's trained model (PPO's old log-probs; with LoRA, the reference's too, adapters
off) and the reference. Both run `strategies.logprob_forward.forward_response_logprobs` on
their model and device; what differs is two hooks:
- `_compute()`: the context of the forwards (the trained model: bf16 autocast for the hf
  strategy in `bf16-mixed`; the reference: none, its weights are in the plan's dtype);
- `_token_budget(max_tokens)`: the padded tokens of a micro-batch (the trained model's
  data-parallel ranks: `data_parallel.token_budget`; the reference: `max_tokens`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

from rollcli.data.batch import Batch
from rollcli.models.moe_routing import routing_state
from rollcli.strategies.host_memory import release_free_memory
from rollcli.strategies.logprob_forward import forward_response_logprobs


class PolicyLogprobs:
    model: torch.nn.Module
    device: torch.device

    @torch.no_grad()
    def compute_logprobs(
        self,
        batch: Batch,
        micro_batch_size: int = 8,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        shared_prefix: bool = False,
    ) -> torch.Tensor:
        """`[B, R]` log-probs of the response tokens under this worker's model, on the CPU:
        the reference's for the KL, actor_train's as PPO's old log-probs. `shared_prefix`:
        each group's prompt computed once (the same numbers); `max_tokens`: the padded
        tokens of a micro-batch (`train.micro_batch_tokens`)."""
        self.model.eval()
        with self._compute():
            logprobs = forward_response_logprobs(
                self.model,
                batch,
                micro_batch_size,
                temperature,
                self.device,
                self._token_budget(max_tokens),
                shared_prefix=shared_prefix,
            )
        if self.device.type == "cpu" and routing_state(self.model) is not None:
            # an MoE forward's expert tensors change size every micro-batch; glibc keeps the
            # freed ones (rlvr-math-moe's reference: 1.5 GB at step 0, 2.3 GB at step 25)
            release_free_memory()
        return logprobs

    def _compute(self) -> AbstractContextManager:
        return nullcontext()

    def _token_budget(self, max_tokens: int | None) -> int | None:
        return max_tokens
