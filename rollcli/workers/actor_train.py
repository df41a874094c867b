"""actor_train: holds the trainable policy, computes old log-probs, runs the policy update,
saves checkpoints and sends its weights to actor_infer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.kl import kl_estimate
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.data.batch import Batch
from rollcli.data.micro_batch import length_sorted_micro_batches, scatter_rows
from rollcli.distributed.weight_sync import WeightSender
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer, response_logprobs
from rollcli.strategies.hf_train import HFTrainer
from rollcli.strategies.threads import set_threads
from rollcli.workers.policy_loss_args import PolicyUpdateArgs

MODEL_INPUTS = ("input_ids", "attention_mask", "position_ids", "prompt_width")


def model_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    return {k: batch.tensors[k] for k in MODEL_INPUTS}


class ActorTrainWorker:
    def __init__(
        self,
        model_path: str,
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 0.0,
        warmup_steps: int = 0,
        grad_clip: float | None = 1.0,
        gradient_checkpointing: bool = False,
        num_threads: int = 1,
        seed: int = 0,
    ) -> None:
        set_threads(num_threads)
        torch.manual_seed(seed)
        self.model_path = model_path
        self.model = load_causal_lm(model_path, train=True)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.tokenizer = load_tokenizer(model_path)
        self.trainer = HFTrainer(
            self.model,
            lr=lr,
            betas=betas,
            weight_decay=weight_decay,
            warmup_steps=warmup_steps,
            grad_clip=grad_clip,
        )
        self.sender: WeightSender | None = None

    @torch.no_grad()
    def compute_logprobs(
        self, batch: Batch, micro_batch_size: int = 8, temperature: float = 1.0
    ) -> torch.Tensor:
        """Log-probs of the response tokens under the current policy (PPO's old log-probs)."""
        self.model.eval()
        return forward_response_logprobs(self.model, batch, micro_batch_size, temperature)

    def train_step(self, batch: Batch, args: PolicyUpdateArgs) -> dict[str, float]:
        """One policy update over the batch (`advantages`, `response_mask`, and `old_logprobs`
        unless the update is on-policy: one epoch, one mini-batch)."""

        def loss_fn(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
            mask = micro["response_mask"]
            logprobs, entropy = response_logprobs(
                self.model, model_inputs(micro), temperature=args.temperature, with_entropy=True
            )
            # On-policy (one optimizer step per batch) the rollout policy is the current one,
            # so the old log-probs are this forward's, detached: no extra forward pass.
            old = micro["old_logprobs"] if "old_logprobs" in micro else logprobs.detach()
            loss, metrics = compute_policy_loss(
                args.policy_loss,
                logprobs=logprobs,
                old_logprobs=old,
                advantages=micro["advantages"],
                mask=mask,
                clip_low=args.clip_low,
                clip_high=args.clip_high,
                dual_clip=args.dual_clip,
                agg=args.loss_agg,
                norm_len=args.norm_len,
            )
            ent = aggregate_loss(entropy, mask, "token-mean")
            metrics = {**metrics, "entropy": float(ent.detach())}
            if args.entropy_coef:
                loss = loss - args.entropy_coef * ent
            if "ref_logprobs" in micro:
                kl = aggregate_loss(
                    kl_estimate(logprobs, micro["ref_logprobs"], args.kl_estimator),
                    mask,
                    "token-mean",
                )
                metrics["kl"] = float(kl.detach())
                if args.kl_loss_coef:
                    loss = loss + args.kl_loss_coef * kl
            return loss, metrics

        return self.trainer.update(
            batch,
            loss_fn=loss_fn,
            mini_batch_size=args.mini_batch_size,
            micro_batch_size=args.micro_batch_size,
            epochs=args.epochs,
        )

    # ---- weight sync -------------------------------------------------------------------
    def init_weight_sync(self, host: str, port: int, world_size: int) -> None:
        self.sender = WeightSender(host, port, world_size)

    def broadcast_weights(self) -> float:
        assert self.sender is not None, "init_weight_sync was not called"
        return self.sender.send(self.model)

    # ---- checkpoints -------------------------------------------------------------------
    def save_pretrained(self, folder: str) -> None:
        """Write the policy as a Hugging Face folder (safetensors + tokenizer)."""
        self.model.save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)

    def save_state(self, folder: str) -> None:
        torch.save(
            {**self.trainer.state_dict(), "rng": torch.get_rng_state()},
            Path(folder) / "actor_optim.pt",
        )

    def load_state(self, folder: str) -> None:
        from safetensors.torch import load_model

        load_model(self.model, str(Path(folder) / "model.safetensors"), strict=False)
        state: dict[str, Any] = torch.load(Path(folder) / "actor_optim.pt", weights_only=False)
        self.trainer.load_state_dict(state)
        torch.set_rng_state(state["rng"])


def forward_response_logprobs(
    model, batch: Batch, micro_batch_size: int, temperature: float
) -> torch.Tensor:  # noqa: ANN001
    """`[B, R]` log-probs of the response tokens, computed on length-sorted, trimmed micro-batches."""
    parts = [
        (idx, response_logprobs(model, model_inputs(micro), temperature=temperature)[0])
        for idx, micro in length_sorted_micro_batches(batch, micro_batch_size)
    ]
    return scatter_rows(parts, len(batch), batch["response_mask"].shape[1])
