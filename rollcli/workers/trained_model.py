"""actor_train's trained model, whatever the pipeline: the trainable policy, its log-probs,
its checkpoints and the weights it sends to actor_infer (the update is the pipeline's
worker's: `actor_train.py`, `sft_train.py`, `dpo_train.py`, `distill.py`).

The model lives on the worker's device (`pick_device`: the GPU Ray assigned when the plan
gave this rank one, else the CPU); batches come from the driver on the CPU and are moved
there before every forward, and what goes back to the driver is moved to the CPU first.

With `world_size > 1` the ranks train data parallel: the trainer is built once the driver
has joined them in a process group (`open_train_group` on rank 0, then `join_train_group`
on every rank; see distributed/data_parallel.py). Rank 0 writes the Hugging Face folder and
sends weights; the other ranks enter the same calls so that collectives (a ZeRO-3 gather,
DeepSpeed's partitioned checkpoint) see every rank.

With `lora` (a `LoraSpec`) the model carries peft adapters and only they train
(strategies/lora.py): `compute_ref_logprobs` is the reference policy (adapters off), the
weight sync sends merged weights under the base names, and a checkpoint holds the merged
Hugging Face folder plus the adapter (`adapter/`), which resuming loads. With the `fsdp2`
strategy the adapters are added to the frozen base first, then the whole is sharded; its
own checkpoint (`fsdp2/`) holds the adapters and their Adam states, which resuming loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rollcli.config.precision_spec import PRECISIONS
from rollcli.config.strategy_spec import STRATEGIES, strategies_where
from rollcli.data.batch import Batch
from rollcli.distributed import data_parallel, stores
from rollcli.distributed.node_files import node_model_folder
from rollcli.distributed.weight_sync import WeightSender
from rollcli.runs.checkpoint import load_tensors_file
from rollcli.strategies import lora as lora_adapters
from rollcli.strategies.device import device_slot, pick_device
from rollcli.strategies.hf_model import (
    load_causal_lm,
    load_saved_weights,
    load_tokenizer,
)
from rollcli.strategies.lora_moe import moe_note
from rollcli.strategies.precision import check_precision, compute_context, torch_dtype
from rollcli.strategies.routing_replay import RouterReplay, set_router_replay
from rollcli.strategies.threads import set_threads
from rollcli.strategies.train_engines import TrainStrategy, make_trainer
from rollcli.strategies.trainer import Trainer, TrainerArgs
from rollcli.tracking.peak import machine_peak
from rollcli.workers.policy_logprobs import PolicyLogprobs

LORA_STRATEGIES = strategies_where(lora=True)  # hf, fsdp2


@dataclass(frozen=True)
class TrainedModelArgs:
    """What actor_train's worker is built from, in every pipeline (`runtime/worker_table.py`
    builds it from the recipe and the plan). `trainer`: the recipe's AdamW settings and
    schedule, handed to the strategy's trainer as they are (`train_engines.make_trainer`);
    `strategy`: the plan's training strategy (`role_args.py`); `precision`: `fp32` or
    `bf16-mixed`, the plan's training dtype (strategies/precision.py); `lora`: train
    low-rank adapters on the frozen model (strategy hf or fsdp2); `seed`: the same initial
    weights on every rank; `num_gpus`: this rank's share of a GPU in the plan's placement
    (0: the CPU)."""

    model_path: str
    trainer: TrainerArgs
    strategy: TrainStrategy = TrainStrategy()
    precision: str = "fp32"
    lora: lora_adapters.LoraSpec | None = None
    gradient_checkpointing: bool = False
    router_replay: RouterReplay = "off"  # an MoE model's (`strategies/routing_replay.py`)
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    num_threads: int = 1
    num_gpus: float = 0.0


class TrainedModelWorker(PolicyLogprobs):
    """The trained model of actor_train, in every pipeline: the model (and its LoRA
    adapters), its trainer, its data-parallel group, its log-probs (`compute_logprobs`,
    written once with the reference's: policy_logprobs.py), its weight sync and its
    checkpoints. The pipelines' workers add their updates: `ActorTrainWorker.train_step`
    (RL), `SFTTrainWorker.sft_step`, `DPOTrainWorker.dpo_step`, `StudentWorker`'s."""

    def __init__(self, args: TrainedModelArgs) -> None:
        model_path = str(node_model_folder(args.model_path))  # on this node (a cluster: see docs)
        strategy, lora = args.strategy.name, args.lora
        set_threads(args.num_threads)
        torch.manual_seed(args.seed)
        self.device = pick_device(args.num_gpus)
        self.model_path = model_path
        self.precision = check_precision(args.precision)
        if lora is not None and strategy not in LORA_STRATEGIES:
            raise ValueError(
                f"LoRA trains with the {' or '.join(LORA_STRATEGIES)} strategy, not {strategy!r}"
            )
        # LoRA in bf16-mixed: the frozen base is loaded in bf16 (no fp32 master copy, as
        # planned; loading it in fp32 first peaked at 4 bytes/param: 29.5 GiB for a 7B
        # model on an H200 where the plan says 16.2); peft keeps the adapters in fp32
        frozen_bf16 = lora is not None and PRECISIONS[self.precision].bf16_compute
        dtype = torch.bfloat16 if frozen_bf16 else torch.float32
        self.model = load_causal_lm(model_path, dtype=dtype, train=True, device=self.device)
        set_router_replay(self.model, args.router_replay)
        if args.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.lora = lora is not None
        self.lora_note: str | None = None  # on an MoE model: what LoRA adapts, what not
        if lora is not None:
            self.model = lora_adapters.apply_lora(self.model, lora)
            self.lora_note = moe_note(self.model)
        self.tokenizer = load_tokenizer(model_path)
        self.strategy = strategy
        # what the worker asks of its strategy: its row (config/strategy_spec.py)
        self.strategy_spec = STRATEGIES[strategy]
        self.rank, self.world_size = args.rank, args.world_size
        self._strategy = args.strategy
        self._trainer_args = args.trainer
        self._trainer: Trainer | None = None
        self._store: Any = None
        if self.world_size == 1:
            self._build_trainer()
        self.sender: WeightSender | None = None

    def _build_trainer(self) -> None:
        self._trainer = make_trainer(
            self._strategy,
            self.model,
            self._trainer_args,
            rank=self.rank,
            world_size=self.world_size,
            precision=self.precision,
        )
        self.model = self._trainer.model  # deepspeed: its engine, which runs the module

    @property
    def trainer(self) -> Trainer:
        """The strategy's trainer; with several ranks, built once they joined their group."""
        if self._trainer is None:
            raise RuntimeError(
                f"rank {self.rank} of {self.world_size} has no trainer yet: call "
                "open_train_group on rank 0, then join_train_group on every rank"
            )
        return self._trainer

    def trainable_parameters(self) -> tuple[int, int]:
        """(parameters that train, all parameters): with LoRA, the adapters' share."""
        return lora_adapters.trainable_count(self.model)

    def lora_coverage(self) -> str | None:
        """With LoRA on an MoE model, the line saying what it adapts and leaves frozen
        (`lora_moe.moe_note`); None otherwise."""
        return self.lora_note

    # ---- data parallel ---------------------------------------------------------------
    def open_train_group(self) -> tuple[str, int]:
        """Rank 0: open the group's store; the other ranks join at the (address of this
        node, port) returned."""
        host = stores.node_address()
        self._store = data_parallel.open_store(host, self.world_size)
        return host, self._store.port

    def join_train_group(self, host: str, port: int) -> None:
        """Join the data-parallel group (every rank at once), then build the trainer."""
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        data_parallel.join_group(self._store, host, port, self.rank, self.world_size, backend)
        self._build_trainer()

    def _token_budget(self, max_tokens: int | None) -> int | None:
        """`max_tokens` where ranks may run different numbers of forwards (`token_budget`)."""
        return data_parallel.token_budget(self.strategy, self.world_size, max_tokens)

    def _compute(self):  # noqa: ANN202
        """bf16 autocast for the hf strategy in `bf16-mixed` (DeepSpeed's bf16 mode and
        FSDP2's mixed-precision policy cast the module themselves)."""
        return compute_context(
            "fp32" if self.strategy_spec.owns_bf16 else self.precision, self.device
        )

    @torch.no_grad()
    def compute_ref_logprobs(
        self,
        batch: Batch,
        micro_batch_size: int = 8,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        shared_prefix: bool = False,
    ) -> torch.Tensor:
        """The reference policy's log-probs with LoRA: this model with its adapters off."""
        if not self.lora:
            raise RuntimeError("compute_ref_logprobs needs LoRA; without it a reference runs")
        with lora_adapters.adapters_off(self.model):
            return self.compute_logprobs(
                batch, micro_batch_size, temperature, max_tokens, shared_prefix
            )

    def matmul_peak(self, seconds: float = 1.0) -> dict[str, Any]:
        """This rank's matmul FLOP/s on its device in its compute dtype, measured once per
        machine (`tracking/peak.py`): `{"flops", "device", "dtype", "measured_at",
        "cache_file", "cached"}` (`cached`: an earlier run's figure was reused)."""
        dtype = torch.bfloat16 if PRECISIONS[self.precision].bf16_compute else torch.float32
        return machine_peak(self.device, dtype, seconds=seconds)

    # ---- weight sync -------------------------------------------------------------------
    def device_slot(self) -> dict:
        """Where this rank's model lives (see `weight_sync.choose_backend`)."""
        return device_slot(self.device)

    def open_weight_sync(
        self, world_size: int, backend: str = "gloo", dtype: str | None = None
    ) -> tuple[str, int]:
        """Open the weight-sync group's store; the receivers join at the (address of this
        node, port) returned. `backend`: gloo (any device: buckets travel through host
        memory), nccl (GPUs of their own) or cuda_ipc (one shared GPU: handles, no copy
        through the host); `dtype`: the receivers' (weights are cast to it)."""
        host = stores.node_address()
        cast = torch_dtype(dtype) if dtype else None
        self.sender = WeightSender(host, world_size, backend=backend, dtype=cast)
        return host, self.sender.port

    def connect_weight_sync(self) -> None:
        assert self.sender is not None, "open_weight_sync was not called"
        self.sender.connect()

    def broadcast_weights(self) -> float:
        """Rank 0 sends; other ranks only take part in gathering whole weights (ZeRO-3)."""
        if self.rank != 0:
            with self._full_weights():
                return 0.0
        assert self.sender is not None, "open_weight_sync was not called"
        with self._full_weights() as model:
            if self.lora:  # merged weights under the base names, one tensor at a time
                return self.sender.send(
                    lora_adapters.base_tensors(model), lora_adapters.merged_value(model)
                )
            return self.sender.send(model)

    def sent_prints(self) -> dict:
        """The fingerprints of the last weights sent, and the time they took
        (`distributed/sync_check.py`)."""
        assert self.sender is not None, "open_weight_sync was not called"
        return {"prints": self.sender.prints, "check_s": self.sender.check_s}

    def _full_weights(self):  # noqa: ANN202
        """The model with whole parameters (a ZeRO-3 trainer gathers its partitions, FSDP2
        a plain copy on rank 0); every rank must enter."""
        return self.trainer.full_weights()

    # ---- checkpoints -------------------------------------------------------------------
    def save_pretrained(self, folder: str) -> None:
        """Write the policy as a Hugging Face folder (safetensors + tokenizer); rank 0 writes,
        every rank takes part in gathering the weights. With LoRA: the merged weights, and
        the adapter in `adapter/`."""
        if self.lora:
            self._save_lora(folder)
            return
        with self._full_weights() as model:
            if self.rank == 0:
                model.save_pretrained(folder, safe_serialization=True)
        if self.rank == 0:
            self.tokenizer.save_pretrained(folder)

    def _save_lora(self, folder: str) -> None:
        with self._full_weights() as model:
            if self.rank != 0:
                return
            lora_adapters.save_merged(model, folder)
            lora_adapters.save_adapter(model, Path(folder) / lora_adapters.ADAPTER_DIR)
        self.tokenizer.save_pretrained(folder)

    def save_state(self, folder: str) -> None:
        """The optimizer state: deepspeed and fsdp2 ranks each write their partition; with
        `hf` the ranks hold the same state and rank 0 writes it."""
        if self.strategy_spec.checkpoint_dir:  # deepspeed, fsdp2: their own partitioned states
            self.trainer.save_checkpoint(folder)
        if self.rank != 0:
            return
        torch.save(
            {**self.trainer.state_dict(), "rng": torch.get_rng_state()},
            Path(folder) / "actor_optim.pt",
        )

    def load_state(self, folder: str) -> None:
        # tensors and plain containers only: loading runs no code from the run folder
        state: dict[str, Any] = load_tensors_file(
            Path(folder) / "actor_optim.pt", map_location=self.device
        )
        self.trainer.load_state_dict(state)
        if self.strategy_spec.checkpoint_dir:  # weights (fsdp2 + LoRA: the adapters), optimizer
            self.trainer.load_checkpoint(folder)  # partitions and scheduler: its own files
        elif self.lora:
            lora_adapters.load_adapter(self.model, Path(folder) / lora_adapters.ADAPTER_DIR)
        else:  # one file or shards; strict (tied weights excepted)
            load_saved_weights(self.model, folder, device=str(self.device))
        torch.set_rng_state(state["rng"].cpu())
