"""actor_train of the RL pipelines (rlvr, agentic): the trained model (`trained_model.py`)
and the policy update, whose objective is `algorithms/objective.py`."""

from __future__ import annotations

import functools

import torch

from rollcli.algorithms.aggregation import micro_batch_share
from rollcli.algorithms.loss_metrics import Metric
from rollcli.algorithms.objective import rl_loss, rl_normalisers, rows_with_gradient
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    BEHAVIOUR_LOGPROBS,
    OLD_LOGPROBS,
    OLD_ROUTED_EXPERTS,
    RESPONSE_MASK,
)
from rollcli.data.micro_batch import trim_padding
from rollcli.distributed import data_parallel
from rollcli.models.moe_routing import kept_router_logits, router_losses, routing_state, take_stats
from rollcli.strategies.attention_masks import hf_module
from rollcli.strategies.device import batch_to, to_cpu
from rollcli.strategies.host_memory import release_free_memory
from rollcli.strategies.logprob_forward import (
    logprob_forward,
    logprobs_and_routing,
    model_inputs,
)
from rollcli.workers.trained_model import TrainedModelWorker


class ActorTrainWorker(TrainedModelWorker):
    def train_step(self, batch: Batch, args: PolicyUpdateArgs) -> dict[str, float]:
        """One policy update over the batch (`advantages`, `response_mask`, and `old_logprobs`
        unless the update is on-policy: one epoch, one mini-batch). With an `action_mask`
        (agentic: each reply's first action token) the entropy bonus is taken over those
        tokens only and their mean entropy is reported as `action_entropy`.

        Every micro-batch's loss is its share of the whole mini-batch's (over all ranks),
        so the step does not depend on how rows are split into micro-batches
        (`aggregation.micro_batch_share`); `norm_len` defaults to the batch's padded
        response width, the same in every micro-batch and on every rank.

        With the hf strategy, rows whose gradient is exactly 0 (`rows_with_gradient`: e.g.
        raftpp's below-the-mean episodes, or a group whose advantages are all 0, when no
        entropy bonus or KL term is on) skip their forward and backward; the step is the
        same, and `trained_rows_frac` says what share of the rows were computed. Other
        strategies gather weights inside the forward, so every rank runs every row."""
        norm_len = args.norm_len or batch[RESPONSE_MASK].shape[1]
        micro_batcher, forward = logprob_forward(args.shared_prefix)
        moe = routing_state(self.model) is not None
        before = self._unreplayed_mismatch(batch, args) if moe else {}

        aux_coef = moe_aux_coef(self.model, args) if moe else 0.0

        def loss_fn(micro: Batch, totals: torch.Tensor) -> tuple[torch.Tensor, dict[str, Metric]]:
            with self._compute():
                micro = batch_to(micro, self.device)
                with kept_router_logits(self.model) as routing:
                    logprobs, entropy = forward(
                        self.model,
                        model_inputs(micro),
                        temperature=args.temperature,
                        with_entropy=True,
                        head_mask=micro[RESPONSE_MASK] > 0,  # every term is over the loss mask
                    )
                loss, metrics = rl_loss(micro, logprobs, entropy, args, norm_len, totals)
                if routing is None:
                    return loss, metrics
                balance, z = router_losses(routing)
                # a per-token mean, weighted like the KL: this micro-batch's share of tokens
                share = micro_batch_share("token-mean", micro[RESPONSE_MASK], totals[3:6])
                loss = loss + (aux_coef * balance + args.moe_z_coef * z) * share
                tokens = float(micro[RESPONSE_MASK].sum())
                return loss, {
                    **metrics,
                    **logprob_mismatch(micro, logprobs),
                    "moe/aux_loss": (float(balance.detach()), tokens),
                    "moe/z_loss": (float(z.detach()), tokens),
                }

        mini = args.mini_batch_size
        budget = data_parallel.token_budget(self.strategy, self.world_size, args.micro_batch_tokens)
        split = functools.partial(micro_batcher, max_tokens=budget)
        skip = self.strategy_spec.skips_rows  # hf: its ranks meet once per optimizer step
        metrics = self.trainer.update(
            batch,  # data parallel: this rank's share, `mini / world_size` rows per step
            loss_fn=loss_fn,
            mini_batch_size=mini // self.world_size if mini else None,
            micro_batch_size=args.micro_batch_size,
            epochs=args.epochs,
            micro_batches=_rows_with_gradient(split, args) if skip else split,
            normalisers=functools.partial(rl_normalisers, args=args),
            dropout=False,  # the policy gradient of the policy that sampled: no dropout
        )
        if skip:
            metrics["trained_rows_frac"] = float(rows_with_gradient(batch, args).float().mean())
        if moe:  # the training forwards' routing agreement and expert load
            metrics.update({**take_stats(self.model), **before})
            if self.device.type == "cpu":
                # each expert's rows differ in number every micro-batch, so glibc keeps
                # freed blocks of ever new sizes: rlvr-math-moe's trainer grew from 10.3 to
                # 13.0 GB over 23 steps and was killed for memory (host_memory.py)
                release_free_memory()
        return to_cpu(metrics)

    @torch.no_grad()
    def compute_old_policy(
        self,
        batch: Batch,
        micro_batch_size: int = 8,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        shared_prefix: bool = False,
    ) -> Batch:
        """R2: the old policy's log-probs (`old_logprobs`, as `compute_logprobs`) and the
        experts it picked (`old_routed_experts`), which the update's forwards replay."""
        if shared_prefix:
            raise ValueError("router_replay R2 records on plain rows: train.shared_prefix=false")
        self.model.eval()
        with self._compute():
            logprobs, routing = logprobs_and_routing(
                self.model,
                batch,
                micro_batch_size,
                temperature,
                self.device,
                self._token_budget(max_tokens),
            )
        return Batch({OLD_LOGPROBS: logprobs, OLD_ROUTED_EXPERTS: routing})

    @torch.no_grad()
    def _unreplayed_mismatch(self, batch: Batch, args: PolicyUpdateArgs) -> dict[str, float]:
        """`moe/logprob_mismatch_unreplayed`: on the batch's first rows (a micro-batch), the
        mismatch the old policy would have without routing replay; {} without the
        sampler's log-probs or a replay to leave out."""
        state = routing_state(self.model)
        if state is None or state.mode == "off" or BEHAVIOUR_LOGPROBS not in batch:
            return {}
        rows = torch.arange(min(len(batch), args.micro_batch_size))
        micro = batch_to(trim_padding(batch.select(rows)), self.device)
        _, forward = logprob_forward(False)
        mode, state.mode = state.mode, "off"
        try:
            with self._compute():
                logprobs, _ = forward(self.model, model_inputs(micro), temperature=args.temperature)
        finally:
            state.mode = mode
        take_stats(self.model)  # this slice's counts are not the update's
        gap = logprob_mismatch(micro, logprobs)["moe/logprob_mismatch"]
        assert isinstance(gap, tuple)  # (value, weight)
        return {"moe/logprob_mismatch_unreplayed": gap[0]}


def moe_aux_coef(model: torch.nn.Module, args: PolicyUpdateArgs) -> float:
    """`algorithm.moe_aux_coef`, or the model config's `router_aux_loss_coef` (Qwen3-MoE's
    0.001, Mixtral's 0.02) where it is unset."""
    if args.moe_aux_coef is not None:
        return args.moe_aux_coef
    config = hf_module(model).config
    return float(getattr(config, "router_aux_loss_coef", 0.0) or 0.0)


def logprob_mismatch(micro: Batch, logprobs: torch.Tensor) -> dict[str, Metric]:
    """`moe/logprob_mismatch`: the mean |trainer - sampler| log-prob of the sampled tokens,
    the trainer's being the old policy's (`old_logprobs`, or this forward's where the update
    is on-policy), weighted by the micro-batch's loss tokens; {} without the sampler's."""
    if BEHAVIOUR_LOGPROBS not in micro:
        return {}
    mask = micro[RESPONSE_MASK] > 0
    old = micro[OLD_LOGPROBS] if OLD_LOGPROBS in micro else logprobs.detach()
    tokens = float(mask.sum())
    gap = (old - micro[BEHAVIOUR_LOGPROBS]).abs()[mask].sum() / max(tokens, 1.0)
    return {"moe/logprob_mismatch": (float(gap), tokens)}


def _rows_with_gradient(split, args: PolicyUpdateArgs):  # noqa: ANN001, ANN202
    """`split` (a micro-batcher) over the rows of each mini-batch that have a gradient; all
    of them when none has (the optimizer then steps on zero gradients, as it would anyway)."""

    def micro_batches(mini: Batch, size: int) -> list[tuple[torch.Tensor, Batch]]:
        keep = rows_with_gradient(mini, args)
        if bool(keep.all()) or not bool(keep.any()):
            return split(mini, size)
        rows = keep.nonzero().squeeze(1)
        return [(rows[idx], micro) for idx, micro in split(mini.select(rows), size)]

    return micro_batches
