"""The measurements of the GPU proof kit for one model (bench/gpu_proof.py runs this module in
a process of its own per model, so every model starts on an empty GPU and a crash or an
out-of-memory loses that model's remaining cases only).

Every case uses roll's own classes: `ActorTrainWorker` (the hf strategy and DeepSpeed ZeRO-2/3),
`ActorInferWorker` with the hf engine, `ReferenceWorker`, the weight sync's gloo group
(colocated on one GPU, as `choose_backend` picks for a shared GPU), and `roll plan`'s
per-role memory (`plan_recipe` of rlvr-math with the kit's shapes). Weights are random
(`rollcli.models.shapes`): timings and memory depend on shapes, not values.

A random model almost never samples its EOS (1 in ~150k), so generation passes a block of
`stop_token_ids` sized for the mean response to end near half of `--new-tokens`: the batch
shrinks as an RL rollout's does.
"""

from __future__ import annotations

import gc
import json
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

GIB = 1024**3


@dataclass(frozen=True)
class Shapes:
    """The kit's RL shapes (the plan is asked for the same)."""

    prompt_tokens: int = 256
    new_tokens: int = 256
    micro_batch: int = 4
    train_rows: int = 16
    gen_batches: tuple[int, ...] = (64, 256)
    grpo_prompts: int = 8
    group_size: int = 8
    grad_checkpointing: bool = True

    @property
    def seq_len(self) -> int:
        return self.prompt_tokens + self.new_tokens


class Device:
    """Where the cases run: CUDA (memory from torch's allocator) or the CPU (no allocator
    statistics: memory is reported as not measured)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.torch = torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")
        self.num_gpus = 1.0 if kind == "cuda" else 0.0
        self.train_precision = "bf16-mixed" if kind == "cuda" else "fp32"
        self.infer_dtype = "bfloat16" if kind == "cuda" else "float32"

    def sync(self) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize()

    def reset_peak(self) -> int:
        """Start a measurement: the bytes already allocated (left by earlier cases)."""
        gc.collect()
        if self.kind != "cuda":
            return 0
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()

    def peak(self) -> int | None:
        return torch.cuda.max_memory_allocated() if self.kind == "cuda" else None

    def capacity_gib(self) -> float | None:
        if self.kind != "cuda":
            return None
        return torch.cuda.get_device_properties(0).total_memory / GIB


def timed(device: Device, fn: Callable[[], Any]) -> tuple[Any, float]:
    device.sync()
    start = time.perf_counter()
    out = fn()
    device.sync()
    return out, time.perf_counter() - start


# ---- roll's plan -------------------------------------------------------------------------
def planned_bytes(model: str, device: Device, shapes: Shapes, extra: list[str]) -> dict[str, int]:
    """`roll plan rlvr-math --model MODEL --gpus 1` (0 on the CPU) with the kit's shapes:
    each role's active bytes per rank, and `device`: the plan's peak on its busiest device
    (the colocated roles' sum at the peak phase)."""
    from rollcli.config.loader import load_recipe
    from rollcli.planning.from_recipe import plan_recipe

    overrides = [
        "rollout.engine=hf",
        f"data.max_prompt_tokens={shapes.prompt_tokens}",
        f"rollout.max_new_tokens={shapes.new_tokens}",
        f"train.micro_batch_size={shapes.micro_batch}",
        f"train.gradient_checkpointing={str(shapes.grad_checkpointing).lower()}",
        *extra,
    ]
    flags = {"model": model, "resources.gpus": 1 if device.kind == "cuda" else 0}
    cfg, _ = load_recipe("rlvr-math", overrides, flags)
    plan = plan_recipe(cfg, gpu_mem_gib=device.capacity_gib())
    out = {role: mem.active.total for role, mem in plan.role_memory.items()}
    out["device"] = max(d.memory_bytes["total"] for d in plan.devices)
    return out


def memory_row(planned: int | None, measured: int | None, before: int) -> dict[str, Any]:
    import resource

    row: dict[str, Any] = {"planned_gib": planned / GIB if planned is not None else None}
    # the process's resident peak so far (Linux: KiB): host memory, offloaded states included
    row["host_peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if measured is not None:
        row["measured_gib"] = (measured - before) / GIB
        row["left_by_earlier_gib"] = before / GIB
        if planned:
            row["plan_over_measured"] = planned / max(1, measured - before)
    return row


# ---- batches -----------------------------------------------------------------------------
def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, vocab, (n, length), generator=g).tolist()


def train_batch(prompts: list[list[int]], responses: list[list[int]], pad: int, seed: int):
    """A policy-update batch: the rollout layout plus per-sample advantages on every token."""
    from rollcli.data.batch import Batch
    from rollcli.data.padding import rollout_tensors

    tensors = rollout_tensors(prompts, responses, pad)
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(len(prompts), 1, generator=g)
    tensors["advantages"] = scores * tensors["response_mask"]
    return Batch(tensors)


def update_args(shapes: Shapes, kl_coef: float = 0.0):
    from rollcli.algorithms.update_args import PolicyUpdateArgs

    return PolicyUpdateArgs(
        loss_agg="seq-mean-token-mean",
        micro_batch_size=shapes.micro_batch,
        micro_batch_tokens=None,  # the micro-batch as sized, no token budget
        kl_loss_coef=kl_coef,
        norm_len=shapes.new_tokens,
    )


# ---- cases -------------------------------------------------------------------------------
# a training case: (the recipe keys that plan it, the worker's `TrainStrategy` fields)
TRAIN_CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "hf": ([], {"name": "hf"}),
    # hf without autocast's cast cache (precision.AUTOCAST_CACHE): its bf16 weight copies
    "hf-nocache": ([], {"name": "hf", "autocast_cache": False}),
    "zero2": (
        ["train.strategy=deepspeed", "devices.actor_train.zero_stage=2"],
        {"name": "deepspeed", "zero_stage": 2},
    ),
    "zero3": (
        ["train.strategy=deepspeed", "devices.actor_train.zero_stage=3"],
        {"name": "deepspeed", "zero_stage": 3},
    ),
    "fsdp2": (["train.strategy=fsdp2"], {"name": "fsdp2"}),
    "fsdp2-offload": (  # FSDP2's CPUOffloadPolicy: GPUs only
        ["train.strategy=fsdp2", "devices.actor_train.offload_params=true"],
        {"name": "fsdp2", "offload_params": True},
    ),
    # LoRA (r 16 on q/k/v/o, the recipe's default): on a GPU the frozen base is bf16
    "hf-lora": (["train.lora.r=16"], {"name": "hf", "lora": True}),
    "fsdp2-lora": (["train.strategy=fsdp2", "train.lora.r=16"], {"name": "fsdp2", "lora": True}),
}


def train_case(
    folder: Path,
    model: str,
    device: Device,
    shapes: Shapes,
    peak_flops: float,
    case: str,
    history: Path | None = None,
) -> dict[str, Any]:
    """One real policy update (forward, backward, AdamW) of `train_rows` rows of `seq_len`
    tokens in micro-batches of `micro_batch`, after one untimed update, with the strategy of
    `case` (TRAIN_CASES) in the plan's precision. `history`: a folder for the timed update's
    CUDA allocation history (`torch.cuda.memory`), summarised in the row as what was alive at
    its peak (`peak_breakdown`)."""
    from rollcli.models.registry import get_model_spec
    from rollcli.models.spec import param_count
    from rollcli.strategies import precision
    from rollcli.strategies.lora import LoraSpec
    from rollcli.strategies.train_engines import TrainStrategy
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    extra, fields = TRAIN_CASES[case]
    fields = dict(fields)
    lora = LoraSpec() if fields.pop("lora", False) else None
    precision.AUTOCAST_CACHE = fields.pop("autocast_cache", True)
    strategy = TrainStrategy(**fields)
    planned = planned_bytes(model, device, shapes, extra)["actor_train"]
    before = device.reset_peak()
    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(folder),
            trainer=TrainerArgs(lr=1e-6),
            gradient_checkpointing=shapes.grad_checkpointing,
            num_gpus=device.num_gpus,
            precision=device.train_precision,
            lora=lora,
            strategy=strategy,
        )
    )
    breakdown: dict[str, Any] = {}
    try:
        vocab = get_model_spec(model).vocab_size
        prompts = random_prompts(shapes.train_rows, shapes.prompt_tokens, min(vocab, 49152), 1)
        responses = random_prompts(shapes.train_rows, shapes.new_tokens, min(vocab, 49152), 2)
        batch = train_batch(prompts, responses, worker.tokenizer.pad_token_id, 3)
        args = update_args(shapes)
        worker.train_step(batch, args)  # warm-up: kernels, allocator, optimizer states
        recording = history is not None and device.kind == "cuda"
        if recording:
            device.reset_peak()  # the peak of the recorded update alone
            torch.cuda.memory._record_memory_history(max_entries=500_000, stacks="python")
        metrics, seconds = timed(device, lambda w=worker: w.train_step(batch, args))
        measured = device.peak()
        if recording:
            breakdown = record_peak(history / f"{model}-{case}.pickle")
    finally:
        del worker  # the next case's reset_peak collects and empties the cache
    tokens = shapes.train_rows * shapes.seq_len
    # forward 2N, backward 4N FLOPs per token (LoRA: 2N, no weight gradients); recomputing
    # each layer adds a forward
    backward = 2 if lora is not None else 4
    flops = (2 + backward + 2 * shapes.grad_checkpointing) * param_count(get_model_spec(model))
    flops *= tokens
    return {
        "case": f"train-{case}",
        "step_s": seconds,
        "tokens_per_s": tokens / seconds,
        "mfu": flops / seconds / peak_flops,
        "loss_finite": all(v == v for v in metrics.values() if isinstance(v, float)),
        **memory_row(planned, measured, before),
        **breakdown,
    }


def record_peak(path: Path) -> dict[str, Any]:
    """Stop the CUDA allocation history, dump it to `path` and summarise its peak."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.cuda.memory._dump_snapshot(str(path))
        snapshot = torch.cuda.memory._snapshot()
        return {"peak_breakdown": peak_breakdown(snapshot["device_traces"][0])}
    except Exception as err:  # a summary that fails must not lose the case's row
        return {"peak_breakdown_error": f"{type(err).__name__}: {err}"[:300]}
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def peak_breakdown(trace: list[dict[str, Any]], top: int = 15) -> dict[str, Any]:
    """What the recorded allocations alive at their highest point were, grouped by where
    they were made: the innermost frame in roll's code or in transformers/peft, and the
    innermost frame of all. Allocations made before the recording began are not in it.

    >>> t = [{"action": "alloc", "addr": 1, "size": 4, "frames": [{"filename": "a.py",
    ...       "line": 3, "name": "f"}]},
    ...      {"action": "alloc", "addr": 2, "size": 6, "frames": []},
    ...      {"action": "free_completed", "addr": 1, "size": 4, "frames": []},
    ...      {"action": "alloc", "addr": 3, "size": 1, "frames": []}]
    >>> peak_breakdown(t)["peak_gib"] * 1024**3
    10.0
    >>> sorted(peak_breakdown(t)["groups"].values())
    [4, 6]
    """
    live: dict[int, dict[str, Any]] = {}
    total = best = 0
    at_best: dict[int, dict[str, Any]] = {}
    for event in trace:
        if event["action"] == "alloc":
            live[event["addr"]] = event
            total += event["size"]
            if total > best:
                best, at_best = total, dict(live)
        elif event["action"] == "free_completed" and event["addr"] in live:
            total -= live.pop(event["addr"])["size"]
    groups: dict[str, int] = {}
    for event in at_best.values():
        key = _where(event.get("frames") or [])
        groups[key] = groups.get(key, 0) + event["size"]
    ranked = sorted(groups.items(), key=lambda kv: -kv[1])[:top]
    return {"peak_gib": best / GIB, "groups": dict(ranked)}


def _where(frames: list[dict[str, Any]]) -> str:
    def name(f: dict[str, Any]) -> str:
        return f"{Path(f['filename']).name}:{f['line']} {f['name']}"

    if not frames:
        return "?"
    ours = next(
        (f for f in frames if any(k in f["filename"] for k in ("rollcli", "transformers", "peft"))),
        None,
    )
    return (
        name(frames[0])
        if ours is None or ours is frames[0]
        else f"{name(ours)} < {name(frames[0])}"
    )


def stop_ids(vocab: int, new_tokens: int) -> tuple[int, ...]:
    """A block of token ids whose total probability under near-uniform logits is about
    2 / new_tokens: responses end after ~new_tokens / 2 tokens on average."""
    k = max(1, min(vocab // 2, round(2 * vocab / new_tokens)))
    return tuple(range(vocab - k, vocab))


def generate_case(
    folder: Path,
    model: str,
    device: Device,
    shapes: Shapes,
    peak_flops: float,
    batch: int,
    static: bool = True,
) -> dict[str, Any]:
    """The hf engine of `ActorInferWorker` sampling `batch` prompts of `prompt_tokens` at
    temperature 1 in one decode batch, up to `new_tokens` each. `static`: the engine's
    decode on CUDA (a static KV cache, each step a CUDA graph: hf_static_decode.py), whose
    row also says how many greedy samples equal the dynamic decode's; else the dynamic
    decode (samples leaving the batch as they stop; the engine's only decode before #68)."""
    from rollcli.models.registry import get_model_spec
    from rollcli.models.spec import param_count
    from rollcli.strategies.hf_infer import HFInferEngine
    from rollcli.strategies.sampling import SamplingParams
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    spec = get_model_spec(model)
    planned = planned_bytes(model, device, shapes, [f"devices.actor_infer.max_num_seqs={batch}"])
    before = device.reset_peak()
    worker = ActorInferWorker(
        ActorInferArgs(str(folder), engine="hf", num_gpus=device.num_gpus, dtype=device.infer_dtype)
    )
    engine, pad = worker.engine, worker.tokenizer.pad_token_id
    if device.kind == "cpu":  # the kit's CPU run exercises the static decode too (no graphs)
        engine = HFInferEngine(worker.model, sorted(engine.eos), pad, static_decode=True)
    dynamic = HFInferEngine(worker.model, sorted(engine.eos), pad, static_decode=False)
    if not static:
        engine = dynamic
    check: dict[str, Any] = {"decode": "static" if engine.static else "dynamic"}
    check["cuda_graphs"] = engine.cuda_graphs
    if static and not engine.static:
        check["static_refusal"] = engine.static_refusal
    try:
        prompts = random_prompts(batch, shapes.prompt_tokens, min(spec.vocab_size, 49152), 4)
        params = SamplingParams(
            max_new_tokens=shapes.new_tokens,
            temperature=1.0,
            stop_token_ids=stop_ids(spec.vocab_size, shapes.new_tokens),
        )
        engine.generate(prompts[:4], SamplingParams(max_new_tokens=4), batch_size=4)
        if static and engine.static:  # greedy: the static decode's samples against the dynamic
            greedy = SamplingParams(max_new_tokens=16, temperature=0.0)
            ours = engine.generate(prompts[:8], greedy, batch_size=8)
            want = dynamic.generate(prompts[:8], greedy, batch_size=8)
            check["greedy_equal"] = sum(
                a.token_ids == b.token_ids for a, b in zip(ours, want, strict=True)
            )
            check["greedy_first_logprob_diff"] = max(
                abs(a.logprobs[0] - b.logprobs[0]) for a, b in zip(ours, want, strict=True)
            )
        gens, seconds = timed(
            device, lambda e=engine: e.generate(prompts, params, batch_size=batch)
        )
        measured = device.peak()
    finally:
        del worker, engine, dynamic
    new = sum(len(g.token_ids) for g in gens)
    flops = 2 * param_count(spec) * (new + batch * shapes.prompt_tokens)
    return {
        "case": f"generate-b{batch}" + ("" if static else "-dynamic"),
        **check,
        "seconds": seconds,
        "new_tokens": new,
        "mean_response": new / batch,
        "tokens_per_s": new / seconds,
        "mfu": flops / seconds / peak_flops,
        **memory_row(planned["actor_infer"], measured, before),
    }


def grpo_case(
    folder: Path, model: str, device: Device, shapes: Shapes, peak_flops: float
) -> dict[str, Any]:
    """A GRPO-shaped step with actor_train (hf, the plan's precision), actor_infer (hf
    engine) and the reference colocated on one device: generate `grpo_prompts` x
    `group_size` samples, old and reference log-probs, the update (k3 KL in the loss),
    then the weight sync from trainer to engine. The second of two steps is reported."""
    from rollcli.models.registry import get_model_spec
    from rollcli.models.spec import param_count
    from rollcli.strategies.sampling import SamplingParams
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    spec = get_model_spec(model)
    n_params = param_count(spec)
    samples = shapes.grpo_prompts * shapes.group_size
    planned = planned_bytes(model, device, shapes, [f"devices.actor_infer.max_num_seqs={samples}"])
    before = device.reset_peak()
    kwargs = {"num_gpus": device.num_gpus}
    train = ActorTrainWorker(
        TrainedModelArgs(
            str(folder),
            trainer=TrainerArgs(lr=1e-6),
            gradient_checkpointing=shapes.grad_checkpointing,
            precision=device.train_precision,
            **kwargs,
        )
    )
    infer = ActorInferWorker(
        ActorInferArgs(str(folder), engine="hf", dtype=device.infer_dtype, **kwargs)
    )
    ref = ReferenceWorker(ReferenceArgs(str(folder), dtype=device.infer_dtype, **kwargs))
    host, port = train.open_weight_sync(2, "gloo", infer.weight_dtype())
    joined = threading.Thread(target=train.connect_weight_sync)
    joined.start()
    infer.init_weight_sync(host, port, 1, 2, "gloo")
    joined.join()
    params = SamplingParams(
        n=shapes.group_size,
        max_new_tokens=shapes.new_tokens,
        temperature=1.0,
        stop_token_ids=stop_ids(spec.vocab_size, shapes.new_tokens),
    )
    args = update_args(shapes, kl_coef=0.001)
    prompts = random_prompts(
        shapes.grpo_prompts, shapes.prompt_tokens, min(spec.vocab_size, 49152), 5
    )
    pad = train.tokenizer.pad_token_id
    phases: dict[str, float] = {}
    for step in range(2):
        phases = {}
        gens, phases["generate"] = timed(
            device, lambda: infer.engine.generate(prompts, params, batch_size=samples)
        )
        rows = [prompts[g.prompt_index] for g in gens]
        batch = train_batch(rows, [g.token_ids or [pad] for g in gens], pad, 6 + step)
        sizes = args.forward_sizes()
        old, phases["old_logprobs"] = timed(
            device, lambda b=batch, z=sizes: train.compute_logprobs(b, **z)
        )
        refs, phases["ref_logprobs"] = timed(
            device, lambda b=batch, z=sizes: ref.compute_logprobs(b, **z)
        )
        batch.tensors["old_logprobs"] = old
        batch.tensors["ref_logprobs"] = refs
        _, phases["train"] = timed(device, lambda b=batch: train.train_step(b, args))
        phases["weight_sync"] = _sync(train, infer, device)
    measured = device.peak()
    real = int(batch["response_mask"].sum()) + samples * shapes.prompt_tokens
    new = int(batch["response_mask"].sum())
    work = {  # FLOPs of each phase (2N per token forward, 4N backward, one recompute)
        "generate": 2 * n_params * (new + shapes.grpo_prompts * shapes.prompt_tokens),
        "old_logprobs": 2 * n_params * real,
        "ref_logprobs": 2 * n_params * real,
        "train": (8 if shapes.grad_checkpointing else 6) * n_params * real,
    }
    return {
        "case": "grpo-step",
        "samples": samples,
        "mean_response": new / samples,
        "phases_s": phases,
        "step_s": sum(phases.values()),
        "mfu": {k: work[k] / phases[k] / peak_flops for k in work},
        "weight_sync_gib": n_params * 2 / GIB if device.kind == "cuda" else n_params * 4 / GIB,
        "planned_roles_gib": {
            r: planned[r] / GIB for r in ("actor_train", "actor_infer", "reference")
        },
        **memory_row(planned["device"], measured, before),
    }


def _sync(train: Any, infer: Any, device: Device) -> float:
    """trainer -> engine over the gloo group: the sender in a thread, the receiver here."""
    sent: list[float] = []
    sender = threading.Thread(target=lambda: sent.append(train.broadcast_weights()))
    device.sync()
    start = time.perf_counter()
    sender.start()
    infer.receive_weights()
    sender.join()
    device.sync()
    if not sent:
        raise RuntimeError("the weight sync's sender failed")
    return time.perf_counter() - start


# ---- one model ---------------------------------------------------------------------------
CASES = (*TRAIN_CASES, "generate", "grpo", "sync", "train-cli")


def run_model(
    model: str,
    folder: Path,
    device: Device,
    shapes: Shapes,
    cases: tuple[str, ...],
    out: Path,
    history: Path | None = None,
    deadline: float | None = None,
) -> None:
    """Every chosen case for `model`, each result appended to `out` (jsonl) as it ends, so a
    case that crashes or a kit stopped at its time limit keeps what came before. `train-cli`
    (bench/gpu_proof_train_cli.py) runs `roll train` in processes of its own, all gone by
    `deadline` (`time.time()`), and appends its rows itself."""
    from rollcli.tracking.peak import matmul_peak

    if "train-cli" in cases:
        from gpu_proof_train_cli import train_cli_case

        work = Path(tempfile.gettempdir()) / "roll-train-cli" / model
        end = deadline if deadline is not None else time.time() + 900
        train_cli_case(folder, model, device.kind, work, end, lambda r: _append(out, r))
        cases = tuple(c for c in cases if c != "train-cli")
        if not cases:
            return
    dtype = torch.bfloat16 if device.kind == "cuda" else torch.float32
    size = 8192 if device.kind == "cuda" else 256
    peak_flops = matmul_peak(device.torch, dtype, size=size, seconds=1.0)
    _append(out, {"model": model, "case": "peak", "flops": peak_flops, "dtype": str(dtype)[6:]})
    runs: list[tuple[str, Callable[[], dict[str, Any]]]] = []
    for case in cases:
        if case in TRAIN_CASES:
            runs.append(
                (
                    case,
                    lambda c=case: train_case(
                        folder, model, device, shapes, peak_flops, c, history
                    ),
                )
            )
        elif case == "generate":  # the engine's decode, then the dynamic one it replaces
            for b in shapes.gen_batches:
                for static in (True, False):
                    runs.append(
                        (
                            f"generate-b{b}" + ("" if static else "-dynamic"),
                            lambda b=b, s=static: generate_case(
                                folder, model, device, shapes, peak_flops, b, static=s
                            ),
                        )
                    )
        elif case == "grpo":
            runs.append((case, lambda: grpo_case(folder, model, device, shapes, peak_flops)))
        elif case == "sync":  # the engine in a process of its own: bench/sync_case.py
            from sync_case import sync_case

            runs.append((case, lambda: sync_case(folder, device)))
        else:
            raise ValueError(f"unknown case {case!r}; choose from {', '.join(CASES)}")
    for name, run in runs:
        try:
            row = run()
        except Exception as err:  # one case's failure is a finding, not the kit's end
            row = {
                "case": name,
                "error": f"{type(err).__name__}: {err}"[:500],
                "traceback": traceback.format_exc()[-3000:],
            }
            if isinstance(err, torch.OutOfMemoryError):
                row["error"] = "out of memory: " + row["error"][:300]
        _append(out, {"model": model, **row})


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
