"""critic: a value model (the policy's trunk + a scalar head) for GAE, trained by regression."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from rollcli.algorithms.aggregation import loss_normalisers, micro_batch_share
from rollcli.algorithms.value_loss import value_loss
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import PROMPT_WIDTH, RESPONSE_MASK, RETURNS, VALUES
from rollcli.data.micro_batch import length_sorted_micro_batches, scatter_rows
from rollcli.data.shared_prefix import shared_prefix_micro_batches
from rollcli.distributed.node_files import node_model_folder
from rollcli.runs.checkpoint import load_tensors_file
from rollcli.strategies.attention_masks import padded_rows_mask
from rollcli.strategies.device import batch_to, pick_device, to_cpu
from rollcli.strategies.hf_shared_prefix import shared_prefix_values
from rollcli.strategies.hf_train import HFTrainer
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.threads import set_threads
from rollcli.strategies.trainer import TrainerArgs


def _load_value_model(path: str, device: torch.device) -> torch.nn.Module:
    from transformers import AutoModelForTokenClassification

    # no dropout on the value head (transformers' token-classification default is 0.1): the
    # values the update trains are those compute_values reads, and micro-batching stays exact
    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    if isinstance(getattr(model, "dropout", None), torch.nn.Dropout):
        model.dropout.p = 0.0
    torch.nn.init.zeros_(model.score.weight)  # start from V = 0 everywhere
    if getattr(model.score, "bias", None) is not None:
        torch.nn.init.zeros_(model.score.bias)
    return model.to(device)


def _values(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """V(s_t) for each response token t: the value head read at the position before it."""
    width = int(inputs[PROMPT_WIDTH][0])
    out = model(
        input_ids=inputs["input_ids"],
        attention_mask=padded_rows_mask(model, inputs["attention_mask"]),
        position_ids=inputs["position_ids"],
    )
    return out.logits[:, width - 1 : -1, 0]


def _value_forward(shared_prefix: bool):  # noqa: ANN202
    """`(micro-batcher, values forward)`: plain rows, or the shared-prefix layout
    (`rollcli.data.shared_prefix`: the same values on every response token)."""
    if shared_prefix:
        return shared_prefix_micro_batches, shared_prefix_values
    return length_sorted_micro_batches, _values


@dataclass(frozen=True)
class CriticArgs:
    """`lr` and `grad_clip`: the recipe's `critic.*`; `micro_batch_size`: rows per value
    forward and per forward/backward of an update (`critic.micro_batch_size`, the plan's),
    unless a call gives its own; `num_gpus`: this rank's share of a GPU (0: the CPU)."""

    model_path: str
    lr: float
    grad_clip: float | None = 1.0
    micro_batch_size: int = 8
    seed: int = 0
    num_threads: int = 1
    num_gpus: float = 0.0


class CriticWorker:
    def __init__(self, args: CriticArgs) -> None:
        self.micro_batch_size = args.micro_batch_size
        model_path = str(node_model_folder(args.model_path))  # on this node (a cluster: see docs)
        set_threads(args.num_threads)
        torch.manual_seed(args.seed)
        self.device = pick_device(args.num_gpus)
        self.model = _load_value_model(model_path, self.device)
        self.trainer = HFTrainer(self.model, TrainerArgs(lr=args.lr, grad_clip=args.grad_clip))

    @torch.no_grad()
    def compute_values(
        self, batch: Batch, micro_batch_size: int | None = None, shared_prefix: bool = False
    ) -> torch.Tensor:
        micro_batch_size = micro_batch_size or self.micro_batch_size
        self.model.eval()
        micro_batcher, forward = _value_forward(shared_prefix)
        parts = [
            (idx, forward(self.model, model_inputs(batch_to(m, self.device))).cpu())
            for idx, m in micro_batcher(batch, micro_batch_size)
        ]
        return scatter_rows(parts, len(batch), batch[RESPONSE_MASK].shape[1])

    def train_step(
        self,
        batch: Batch,
        *,
        value_clip: float | None,
        mini_batch_size: int | None,
        micro_batch_size: int | None = None,
        epochs: int = 1,
        shared_prefix: bool = False,
    ) -> dict[str, float]:
        micro_batcher, forward = _value_forward(shared_prefix)

        def normalisers(mini_batch: Batch) -> torch.Tensor:
            return loss_normalisers(mini_batch[RESPONSE_MASK])

        def loss_fn(micro: Batch, totals: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            """The micro-batch's share of the mini-batch's token-mean value loss, so the step
            does not depend on how rows are split into micro-batches."""
            micro = batch_to(micro, self.device)
            mask = micro[RESPONSE_MASK]
            values = forward(self.model, model_inputs(micro))
            loss, metrics = value_loss(values, micro[VALUES], micro[RETURNS], mask, clip=value_clip)
            return loss * micro_batch_share("token-mean", mask, totals), metrics

        metrics = self.trainer.update(
            batch,
            loss_fn=loss_fn,
            mini_batch_size=mini_batch_size,
            micro_batch_size=micro_batch_size or self.micro_batch_size,
            epochs=epochs,
            micro_batches=functools.partial(micro_batcher, max_tokens=None),
            normalisers=normalisers,
        )
        return to_cpu(metrics)

    def save_state(self, folder: str) -> None:
        torch.save(
            {"model": self.model.state_dict(), **self.trainer.state_dict()},
            Path(folder) / "critic.pt",
        )

    def load_state(self, folder: str) -> None:
        # tensors and plain containers only: loading runs no code from the run folder
        state = load_tensors_file(Path(folder) / "critic.pt", map_location=self.device)
        self.model.load_state_dict(state["model"])
        self.trainer.load_state_dict(state)
