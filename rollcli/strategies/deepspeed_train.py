"""The `deepspeed` training strategy: ZeRO stages 1-3, optional optimizer/parameter offload.

An optional extra (`pip install roll-rl[deepspeed]`, built with `DS_BUILD_OPS=0`), imported
only when a recipe picks it. Three traps are handled here:

* its first `initialize` JIT-compiles a shared-memory comm op (35-85 s) unless
  `deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"]` is False, which we set;
* its own fused/CPU Adam compiles for minutes, so we hand it torch's AdamW
  (`zero_allow_untested_optimizer`, `zero_force_ds_cpu_optimizer: false`);
* it wants a torch.distributed process group even for one rank: gloo on CPU, nccl on GPU.

The device is the model's (the worker put it on `pick_device`'s choice): a model on a GPU
gets nccl and DeepSpeed's CUDA accelerator, a model on the CPU gloo and its CPU
accelerator, even on a machine with GPUs.

`DeepSpeedTrainer` runs the update loop of every strategy (`update_loop.UpdateLoop`: epochs
x mini-batches x micro-batches with a caller-given loss), so workers switch strategy without
other changes; its hooks are the engine's backward and step. With N ranks (data parallel)
each rank is given its share of the batch (the driver shards it, see
distributed/data_parallel.py) and DeepSpeed averages the gradients; the process
group must be up before the trainer is built.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rollcli.config.strategy_spec import STRATEGIES
from rollcli.distributed.deepspeed_env import name_cpu_accelerator
from rollcli.distributed.stores import open_store
from rollcli.strategies.trainer import TrainerArgs
from rollcli.strategies.update_loop import UpdateLoop, train_mode

SPEC = STRATEGIES["deepspeed"]  # its row: name, checkpoint folder, install hint
CHECKPOINT_DIR = SPEC.checkpoint_dir  # inside a run's checkpoints/step-N/
CHECKPOINT_TAG = "state"
INSTALL_HINT = SPEC.install_hint


class StrategyUnavailableError(RuntimeError):
    """A training or inference backend that is not installed or cannot run on this machine."""


def import_deepspeed(on_gpu: bool | None = None) -> Any:
    """Import deepspeed with its JIT shared-memory op switched off; a clear error if absent.
    `on_gpu`: whether the model is on a GPU (default: whether CUDA is there)."""
    name_cpu_accelerator(torch.cuda.is_available() if on_gpu is None else on_gpu)
    try:
        import deepspeed
        import deepspeed.ops
    except ImportError as err:
        raise StrategyUnavailableError(
            f"train.strategy deepspeed needs the deepspeed package ({err}); install it with "
            f"`{INSTALL_HINT}` or use train.strategy=hf"
        ) from None
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    return deepspeed


def deepspeed_config(
    *,
    zero_stage: int,
    grad_clip: float | None,
    offload_optimizer: bool = False,
    offload_params: bool = False,
    bf16: bool = False,
) -> dict[str, Any]:
    """The DeepSpeed config dict. Batch sizes are 1 and accumulation is ours (see update).

    >>> deepspeed_config(zero_stage=2, grad_clip=1.0)["zero_optimization"]["stage"]
    2
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0-3, got {zero_stage}")
    if offload_optimizer and zero_stage < 1:
        raise ValueError("offload_optimizer needs zero_stage >= 1")
    if offload_params and zero_stage != 3:
        raise ValueError("offload_params needs zero_stage 3")
    zero: dict[str, Any] = {"stage": zero_stage}
    if offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    if offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": float(grad_clip) if grad_clip is not None else 0.0,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "bf16": {"enabled": bf16},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def init_process_group(
    rank: int,
    world_size: int,
    master_addr: str,
    master_port: int | None = None,
    on_gpu: bool | None = None,
) -> None:
    """torch.distributed for DeepSpeed: gloo on CPU, nccl on GPU.

    With `master_port` the ranks meet there (env://); without it (one rank) the group
    rendezvous on a store whose port the kernel picks, so no other process can take it.
    """
    on_gpu = torch.cuda.is_available() if on_gpu is None else on_gpu
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if on_gpu else "gloo"
    store = None
    if master_port is None:
        if world_size != 1:
            raise ValueError(f"{world_size} ranks need a master_port to meet on")
        store = open_store(master_addr, 1, datetime.timedelta(minutes=10))
        master_port = store.port
    os.environ.update(
        MASTER_ADDR=master_addr,
        MASTER_PORT=str(master_port),
        RANK=str(rank),
        # under Ray each rank sees only the GPU it was given, so this is 0 there
        LOCAL_RANK=str(rank % max(1, torch.cuda.device_count() or 1) if on_gpu else 0),
        WORLD_SIZE=str(world_size),
    )
    deepspeed = import_deepspeed(on_gpu)
    if store is not None:
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


class DeepSpeedTrainer(UpdateLoop):
    """A Hugging Face model wrapped in a DeepSpeed engine with torch's AdamW (a
    `trainer.Trainer`)."""

    def __init__(
        self,
        model: torch.nn.Module,
        args: TrainerArgs,
        *,
        zero_stage: int = 2,
        offload_optimizer: bool = False,
        offload_params: bool = False,
        rank: int = 0,
        world_size: int = 1,
        master_addr: str = "127.0.0.1",
        master_port: int | None = None,
        bf16: bool = False,
    ) -> None:
        """`bf16`: DeepSpeed's bf16 mode (the plan's `bf16-mixed`): bf16 weights and
        gradients, fp32 master weights in the optimizer."""
        on_gpu = next(model.parameters()).device.type == "cuda"
        deepspeed = import_deepspeed(on_gpu)
        if world_size > 1:
            import torch.distributed as dist

            if not (dist.is_initialized() and dist.get_world_size() == world_size):
                raise RuntimeError(
                    f"DeepSpeedTrainer with world_size={world_size}: join the process group "
                    "first (rollcli.distributed.data_parallel.join_group)"
                )
        init_process_group(rank, world_size, master_addr, master_port, on_gpu)
        self.rank, self.world_size, self.zero_stage = rank, world_size, zero_stage
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            params, lr=args.lr, betas=args.betas, weight_decay=args.weight_decay
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, args.lr_factor())
        config = deepspeed_config(
            zero_stage=zero_stage,
            grad_clip=args.grad_clip,
            offload_optimizer=offload_optimizer,
            offload_params=offload_params,
            bf16=bf16,
        )
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=scheduler, config=config
        )
        # Forward passes go through the engine: under ZeRO-3 its forward advances the
        # micro-step counter that makes gradients accumulate instead of overwrite.
        self.model = self.engine
        self._deepspeed = deepspeed

    # ---- the update loop's hooks (update_loop.py) ----------------------------------------
    # Gradient accumulation is ours: micro-batch losses are weighted as `micro_batch_losses`
    # says and the engine steps at the boundary we set. Under ZeRO-3 every rank must run the
    # same number of micro-batches (the gathers are collective), so the shares must be equal
    # (the driver checks).
    def _train_mode(self, dropout: bool) -> None:
        self.engine.train()
        train_mode(self.engine.module, dropout)

    def _start_step(self) -> None:
        """Nothing: the engine zeroes the gradients when it steps at the boundary."""

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(last)
        self.engine.backward(loss, scale_wrt_gas=False)
        self.engine.step()

    def _finish_step(self) -> float:
        """The engine clipped and stepped at the last micro-batch; its gradient norm."""
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    @contextlib.contextmanager
    def full_weights(self) -> Iterator[torch.nn.Module]:
        """The module with every parameter whole (ZeRO-3 gathers its partitions)."""
        module = self.engine.module
        if self.zero_stage != 3:
            yield module
            return
        with self._deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
            yield module

    # ---- checkpoints: DeepSpeed's own format (model, optimizer partitions, scheduler) ----
    def state_dict(self) -> dict[str, Any]:
        return {"strategy": SPEC.name, "zero_stage": self.zero_stage}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("strategy") != SPEC.name:
            raise ValueError(
                "this checkpoint was written by the hf strategy; resume it with train.strategy=hf"
            )

    def save_checkpoint(self, folder: str | Path) -> None:
        """Every rank writes its partition under `folder/deepspeed/state/`."""
        self.engine.save_checkpoint(str(Path(folder) / CHECKPOINT_DIR), tag=CHECKPOINT_TAG)

    def load_checkpoint(self, folder: str | Path) -> None:
        path = Path(folder) / CHECKPOINT_DIR
        if not (path / CHECKPOINT_TAG).is_dir():
            raise FileNotFoundError(
                f"{path / CHECKPOINT_TAG} is missing: this checkpoint was not written by the "
                "deepspeed strategy"
            )
        loaded, _ = self.engine.load_checkpoint(str(path), tag=CHECKPOINT_TAG)
        if loaded is None:
            raise RuntimeError(f"deepspeed could not load the checkpoint in {path}")
