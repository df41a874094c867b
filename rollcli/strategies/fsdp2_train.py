"""The `fsdp2` training strategy: torch's FSDP2 (`torch.distributed.fsdp.fully_shard`).

Every decoder layer is sharded on its own, then the root (embeddings, final norm, LM head,
and a tied head with its embedding in one group): each rank keeps 1/N of every weight,
gradient and Adam state (ZeRO-3's split, with torch alone: no extra package). A layer's
weights are all-gathered just before its forward and backward and freed after; its
gradients are reduce-scattered as the backward leaves it. That is a collective in every
forward, so every rank must run the same number of forwards (`data_parallel.token_budget`
gives fsdp2 with several ranks no token budget).

Gradients are averaged, not summed: for fp32 and bf16 reductions FSDP2 reduce-scatters with
`ReduceOp.AVG` (gloo on the CPU as nccl; `tests/strategies/test_fsdp2_train.py` checks two
ranks' step against one process's on the whole batch). Clipping uses the norm over all
ranks' shards (`get_total_norm` on the DTensor gradients, then `full_tensor()`).

Precision: fp32 on the CPU. On GPUs in `bf16-mixed`, `MixedPrecisionPolicy(param_dtype=
bf16, reduce_dtype=fp32)`: the sharded parameters are the fp32 master weights, layers
compute on bf16 copies gathered for them, and gradients reach the shards in fp32 (4 + 4 + 8
bytes per parameter over N ranks, what `planning/role_memory.py` counts). `offload_params`:
FSDP2's `CPUOffloadPolicy`, which keeps parameters, gradients and optimizer states in host
memory and steps the optimizer there (GPU runs only: on the CPU they are there already).

The update loop is every strategy's (`update_loop.UpdateLoop`, through `HFTrainer`), so the
contract (epochs x mini-batches x micro-batches, `micro_batch_losses` shares, metrics) is
literally the same; only building, clipping and checkpoints differ. AdamW is torch's fused kernel (it takes DTensor shards).

Checkpoints are `torch.distributed.checkpoint` (DCP) folders: each rank writes its shards
of the model and Adam states, plus the scheduler, in `fsdp2/` (written under a temporary
name and renamed, so a crash never leaves a half-written one); a fresh process of any
number of ranks loads them back exactly. `full_weights` gathers the whole weights onto
rank 0's host memory, in a copy of the module built on the meta device (no memory until
filled), for `save_pretrained` and the weight sync.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rollcli.config.strategy_spec import STRATEGIES
from rollcli.distributed.stores import open_store
from rollcli.strategies.hf_train import HFTrainer, adamw_with_schedule
from rollcli.strategies.trainer import TrainerArgs

SPEC = STRATEGIES["fsdp2"]  # its row: name, checkpoint folder
CHECKPOINT_DIR = SPEC.checkpoint_dir  # inside a run's checkpoints/step-N/
LAYER_LISTS = ("layers", "h", "blocks")  # Llama/Qwen/Mistral..., GPT-2, others


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks FSDP2 shards one by one: the items of the outermost `nn.ModuleList`s named
    `layers` (Hugging Face decoders: `model.model.layers`, under peft one level deeper),
    `h` or `blocks`."""
    lists = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and name.rsplit(".", 1)[-1] in LAYER_LISTS
    }
    outer = [m for n, m in lists.items() if not any(n.startswith(o + ".") for o in lists)]
    if not outer:
        raise ValueError(
            f"train.strategy fsdp2 shards each decoder layer, but {type(model).__name__} has "
            f"no list of layers (an nn.ModuleList named {' or '.join(LAYER_LISTS)}); train "
            "it with train.strategy=hf or deepspeed"
        )
    return [layer for module in outer for layer in module]


def meta_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model` whose parameters are on the meta device (no memory) and whose
    buffers (rotary frequencies: replicated, never sharded) are real, in host memory. Tied
    parameters stay one parameter. `full_weights` fills a copy of it."""
    memo: dict[int, Any] = {
        id(p): torch.nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad)
        for p in model.parameters()
    }
    skeleton = copy.deepcopy(model, memo)
    for module in skeleton.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = buffer.cpu()
    return skeleton


def filled(skeleton: torch.nn.Module, full: Mapping[str, Any]) -> torch.nn.Module:
    """A copy of `skeleton` holding the tensors of the full state dict `full`; a parameter
    with several names (tied) is one parameter again, found under any of them."""
    module = copy.deepcopy(skeleton)
    names: dict[int, list[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    made: dict[int, torch.nn.Parameter] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        dot = f"{prefix}." if prefix else ""
        for name, p in sub._parameters.items():
            if p is None:
                continue
            if id(p) not in made:
                found = [n for n in names[id(p)] if n in full]
                if not found:
                    raise KeyError(f"the gathered state dict has no {names[id(p)][0]}")
                made[id(p)] = torch.nn.Parameter(full[found[0]], requires_grad=False)
            sub._parameters[name] = made[id(p)]
        for name in sub._buffers:
            if f"{dot}{name}" in full:
                sub._buffers[name] = full[f"{dot}{name}"]
    return module


def _join_one_rank_group(on_gpu: bool) -> None:
    """FSDP2 needs a process group even for one rank: a one-rank group on a store whose
    port the kernel picks (nothing else can take it)."""
    if dist.is_initialized():
        return
    store = open_store("127.0.0.1", 1, datetime.timedelta(minutes=10))
    dist.init_process_group("nccl" if on_gpu else "gloo", store=store, rank=0, world_size=1)


class FSDP2Trainer(HFTrainer):
    """A Hugging Face model sharded by `fully_shard` over the default process group."""

    def __init__(
        self,
        model: torch.nn.Module,
        args: TrainerArgs,
        *,
        rank: int = 0,
        world_size: int = 1,
        bf16: bool = False,
        offload_params: bool = False,
    ) -> None:
        """`bf16`: the plan's `bf16-mixed` (GPUs only); `offload_params`: FSDP2's CPU offload
        of parameters, gradients and optimizer states (GPUs only). With `world_size > 1`
        this process must already be rank `rank` of the default process group."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        device = next(model.parameters()).device
        on_gpu = device.type == "cuda"
        if bf16 and not on_gpu:
            raise ValueError(
                "train.strategy fsdp2 trains bf16-mixed on GPUs only; on the CPU it trains fp32"
            )
        if offload_params and not on_gpu:
            raise ValueError(
                "devices.actor_train.offload_params (FSDP2's CPU offload) moves states off "
                "GPUs; this rank trains on the CPU, where they are already: set it to false"
            )
        if world_size > 1 and not (dist.is_initialized() and dist.get_world_size() == world_size):
            raise RuntimeError(
                f"FSDP2Trainer with world_size={world_size}: join the process group first "
                "(rollcli.distributed.data_parallel.join_group)"
            )
        _join_one_rank_group(on_gpu)
        self.rank, self.world_size, self.grad_clip = rank, world_size, args.grad_clip
        self._skeleton = meta_copy(model)  # before sharding: the plain module's layout
        mesh = init_device_mesh(device.type, (world_size,))
        shard_args: dict[str, Any] = {"mesh": mesh}
        if bf16:
            shard_args["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            )
        if offload_params:
            shard_args["offload_policy"] = CPUOffloadPolicy()
        for layer in decoder_layers(model):
            fully_shard(layer, **shard_args)
        fully_shard(model, **shard_args)
        self.model = model
        self.optimizer, self.scheduler = adamw_with_schedule(model, args)

    def _finish_step(self) -> float:
        """Clip by the norm of the whole gradient (every rank's shards) and step."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([g for p in params if (g := p.grad) is not None])
        if hasattr(norm, "full_tensor"):  # a DTensor: reduced over the ranks' shards
            norm = norm.full_tensor()
        if self.grad_clip is not None:
            torch.nn.utils.clip_grads_with_norm_(params, self.grad_clip, norm)
        if torch.isfinite(norm):
            self.optimizer.step()
        self.scheduler.step()
        return float(norm)

    @contextlib.contextmanager
    def full_weights(self) -> Iterator[torch.nn.Module | None]:
        """Rank 0: a plain (unsharded) copy of the module holding the whole weights in host
        memory, for `save_pretrained` and the weight sync; the other ranks get None. Every
        rank must enter (the gather is collective). The copy is freed on exit."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        full = get_model_state_dict(self.model, options=options)  # rank 0 only holds it
        if self.rank != 0:
            yield None
            return
        yield filled(self._skeleton, full)

    # ---- checkpoints: DCP shards of model + Adam states + scheduler -------------------
    def state_dict(self) -> dict[str, Any]:
        return {"strategy": SPEC.name, "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        written_by = state.get("strategy", "hf")
        if written_by != SPEC.name:
            raise ValueError(
                f"this checkpoint was written by the {written_by} strategy; resume it with "
                f"train.strategy={written_by}"
            )

    def save_checkpoint(self, folder: str | Path) -> None:
        """Every rank writes its shards to `folder/fsdp2/` (collective)."""
        import torch.distributed.checkpoint as dcp

        final = Path(folder) / CHECKPOINT_DIR
        tmp = Path(folder) / f".{CHECKPOINT_DIR}.tmp"
        if self.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        dist.barrier()
        # returns on every rank once rank 0 has written the metadata, after all shards
        dcp.save({"train": _TrainState(self)}, checkpoint_id=str(tmp))
        if self.rank == 0:
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
        dist.barrier()

    def load_checkpoint(self, folder: str | Path) -> None:
        """Load `folder/fsdp2/` (collective), resharded to this run's ranks if they differ."""
        import torch.distributed.checkpoint as dcp

        path = Path(folder) / CHECKPOINT_DIR
        if not (path / ".metadata").is_file():
            raise FileNotFoundError(
                f"{path} is missing: this checkpoint was not written by the fsdp2 strategy"
            )
        dcp.load({"train": _TrainState(self)}, checkpoint_id=str(path))


class _TrainState:
    """DCP's `Stateful` view of a trainer: sharded model and optimizer state dicts (frozen
    LoRA base weights left out: they are the loaded model's) and the scheduler's."""

    def __init__(self, trainer: FSDP2Trainer) -> None:
        self.trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        t = self.trainer
        options = StateDictOptions(ignore_frozen_params=True)
        model, optim = get_state_dict(t.model, t.optimizer, options=options)
        return {"model": model, "optim": optim, "scheduler": t.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """`state` has the keys `state_dict` gave and `dcp.load` found every one of them in
        the checkpoint (it fails on a missing key), so the only keys `strict=False` lets
        pass are the frozen ones left out on purpose."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        t = self.trainer
        set_state_dict(
            t.model,
            t.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=StateDictOptions(ignore_frozen_params=True, strict=False),
        )
        t.scheduler.load_state_dict(state["scheduler"])
