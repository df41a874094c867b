"""The `hf` training strategy: plain torch AdamW over a Hugging Face model, on CPU or GPU.

`HFTrainer` runs the update loop of every strategy (`update_loop.UpdateLoop`: epochs ×
mini-batches × micro-batches with a caller-given loss); its hooks zero the gradients before
a mini-batch, backpropagate each micro-batch, and clip the gradient norm and step after it.
With `world_size > 1` (data parallel; the caller has joined the default process group) each
rank accumulates over its share of every mini-batch and the ranks average their gradients
with one all-reduce per dtype before clipping, so every rank makes the same step.

AdamW is torch's fused kernel (one pass over each parameter, on CPU as on GPU): the
default multi-tensor version allocates temporaries the size of the model on every step,
0.5-1.3 s per step for smollm2-135m on 2 cores against 0.14 s fused (`getrusage` showed
~120k page faults per foreach step, none fused).

A tied input embedding (its weight is the LM head's) gets a sparse gradient: the head
already gives that weight a dense `[V, H]` gradient, and the embedding's rows are added to
it, instead of a second dense `[V, H]` tensor zero-filled and summed on every micro-batch
(~0.6 s of a smollm2-135m rlvr-math step on 2 cores); the fused head adds its gradient to
`.grad` in place, so the rows land there too (lm_head.py). Gradients are made dense before
clipping, so the optimizer and the all-reduce see dense tensors only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from rollcli.strategies.precision import kept_casts
from rollcli.strategies.trainer import TrainerArgs
from rollcli.strategies.update_loop import UpdateLoop, train_mode


def sparse_tied_embedding(model: torch.nn.Module) -> bool:
    """Make a trainable input embedding that shares its weight with the LM head give a
    sparse gradient; returns whether it does."""
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    if get_in is None or get_out is None:
        return False
    embedding, head = get_in(), get_out()
    tied = (
        type(embedding) is torch.nn.Embedding
        and head is not None
        and head.weight is embedding.weight
        and embedding.weight.requires_grad
    )
    if tied:
        embedding.sparse = True
    return tied


def _fusable(params: list[torch.nn.Parameter]) -> bool:
    """Whether torch's fused AdamW takes these parameters: floating point, one device type
    that has the kernel."""
    kinds = {p.device.type for p in params}
    floating = all(p.dtype in (torch.float16, torch.bfloat16, torch.float32) for p in params)
    return floating and len(kinds) == 1 and kinds <= {"cpu", "cuda"}


def adamw_with_schedule(
    model: torch.nn.Module, args: TrainerArgs
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over `model`'s trainable parameters (fused where the kernel takes them) with
    `args`' lr, betas and weight decay, and its schedule: `args.lr_factor()`'s warm-up and
    decay (lr_schedule.py)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params,
        lr=args.lr,
        betas=args.betas,
        weight_decay=args.weight_decay,
        fused=_fusable(params),
    )
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, args.lr_factor())


class HFTrainer(UpdateLoop):
    """Plain torch AdamW over the model, on its device (a `trainer.Trainer`)."""

    bf16 = False  # FSDP2Trainer's own __init__ leaves it: its policy casts the module

    def __init__(
        self, model: torch.nn.Module, args: TrainerArgs, *, world_size: int = 1, bf16: bool = False
    ) -> None:
        """`bf16`: the plan's `bf16-mixed` (the worker runs the forwards under autocast;
        each optimizer step's casts are kept for its micro-batches: `_step_scope`)."""
        self.model = model
        self.bf16 = bf16
        self.grad_clip = args.grad_clip
        self.world_size = world_size
        sparse_tied_embedding(model)
        self.optimizer, self.scheduler = adamw_with_schedule(model, args)

    # ---- the update loop's hooks (update_loop.py) --------------------------------------
    def _train_mode(self, dropout: bool) -> None:
        train_mode(self.model, dropout)

    def _start_step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def _step_scope(self) -> AbstractContextManager:
        if not self.bf16:  # fp32, or FSDP2 (its mixed-precision policy casts the module)
            return nullcontext()
        return kept_casts(next(self.model.parameters()).device)

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        loss.backward()

    def _finish_step(self) -> float:
        """Clip (after averaging over ranks) and step; the gradient norm before clipping."""
        for p in self.model.parameters():
            if p.grad is not None and p.grad.is_sparse:  # the embedding's rows alone
                p.grad = p.grad.to_dense()
        if self.world_size > 1:
            average_gradients([p for p in self.model.parameters() if p.requires_grad])
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.grad_clip if self.grad_clip is not None else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if torch.isfinite(norm):
            self.optimizer.step()
        self.scheduler.step()
        return float(norm)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])

    @contextlib.contextmanager
    def full_weights(self) -> Iterator[torch.nn.Module]:
        """The model itself: every parameter is whole on every rank."""
        yield self.model

    # ---- checkpoints: the state is all in `state_dict`, the weights in the HF folder ----
    def save_checkpoint(self, folder: str | Path) -> None:
        """Nothing of its own to write: `state_dict` holds the optimizer and scheduler."""

    def load_checkpoint(self, folder: str | Path) -> None:
        """Nothing of its own to read (see `save_checkpoint`)."""


@torch.no_grad()
def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """Replace each gradient by its mean over the default process group's ranks: one
    all-reduce of a flat buffer per dtype. A parameter without a gradient counts as zeros,
    so every rank enters the same collectives."""
    import torch.distributed as dist

    world = dist.get_world_size()
    by_dtype: dict[torch.dtype, list[torch.nn.Parameter]] = {}
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        by_dtype.setdefault(p.grad.dtype, []).append(p)
    for group in by_dtype.values():
        flat = torch.cat([p.grad.reshape(-1) for p in group])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for p in group:
            p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
            offset += p.numel()
