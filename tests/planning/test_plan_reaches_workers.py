"""Every decision of the run's plan reaches the workers' arguments, and the workers act on
them: what a GPU run does is what `roll plan` judged (runtime/role_args.py), and the args
objects the worker table builds from a real plan carry them (runtime/worker_table.py).

No GPU here: the plans are GPU plans (qwen2.5-7b on 8 H100s) built by the same code
`roll plan` and `roll train` run; the workers are built on the CPU with the arguments a GPU
plan gives them (bf16-mixed training, bf16 inference weights)."""

from __future__ import annotations

import math

import pytest
import torch
from weight_sync_pair import send_weights

from rollcli.config.engines import resolve_engine
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.planning.devices import GiB
from rollcli.planning.from_recipe import plan_recipe, recipe_plan_input
from rollcli.runtime.role_args import PlannedInfer, dtype_name, role_args
from rollcli.runtime.worker_table import BuildContext, worker_args
from rollcli.strategies.engine_options import VllmOptions
from rollcli.strategies.precision import torch_dtype
from rollcli.strategies.train_engines import TrainStrategy

# The 7B-on-8-GPUs run of docs/gpu.md and docs/planning.md
SEVEN_B = [
    "train.strategy=deepspeed",
    "devices.actor_train.zero_stage=3",
    "rollout.engine=vllm",
    "devices.actor_infer.gpu_memory_utilization=0.5",
]


def _cfg(overrides: list[str], gpus: int = 8, model: str = "qwen2.5-7b"):
    cfg, _ = load_recipe("rlvr-math", overrides, {"model": model, "resources.gpus": gpus})
    return cfg


def _decisions(cfg):
    inp = recipe_plan_input(cfg)
    plan = plan_recipe(cfg)
    return {req.role: req for req in inp.roles}, plan, role_args(cfg, inp, plan)


def test_every_gpu_plan_decision_is_in_the_workers_arguments() -> None:
    reqs, plan, args = _decisions(_cfg(SEVEN_B))
    assert plan.fits and plan.mode == "colocated"
    train, infer, ref = reqs["actor_train"], reqs["actor_infer"], reqs["reference"]
    # training: strategy, ZeRO layout, mixed precision with fp32 master weights
    assert train.param_bytes == 2
    assert args.strategy == TrainStrategy(
        train.resolved_strategy,
        zero_stage=train.zero_stage,
        offload_optimizer=train.offload_optimizer,
        offload_params=train.offload_params,
    )
    assert args.precision == "bf16-mixed"
    assert (args.strategy.name, train.zero_stage) == ("deepspeed", 3)
    # inference: engine, weight dtype, the KV cache the plan reserved, sleeping when idle
    kv = plan.role_memory["actor_infer"].active.kv_cache
    assert kv > 0 and plan.role_memory["actor_infer"].idle.total == 0
    assert args.infer == PlannedInfer(
        engine=infer.resolved_strategy,
        dtype=dtype_name(infer.param_bytes),
        options=VllmOptions(
            dtype="bfloat16",
            tp=infer.tp,  # its tensor_parallel_size (tests/strategies/test_tp_wiring.py)
            kv_cache_gib=pytest.approx(kv / GiB, abs=1e-3),
            max_num_seqs=infer.max_num_seqs,
            max_model_len=infer.seq_len,
            sleep_mode=True,
        ),
    )
    assert args.infer.sleeps
    # the reference's weights, and what stays on the GPU while others compute
    assert args.reference_dtype == dtype_name(ref.param_bytes) == "bfloat16"
    assert plan.role_memory["actor_train"].idle.total > 0  # nothing offloads it: counted
    assert (
        plan.role_memory["reference"].idle.weights == plan.role_memory["reference"].active.weights
    )


def test_the_readme_7b_run_fits_only_with_its_settings() -> None:
    """The plan counts actor_train's and the reference's states while vLLM generates (they
    stay on the GPU): vLLM at its default 0.8 of the GPU does not fit beside them."""
    _, plan, _ = _decisions(_cfg(SEVEN_B))
    assert plan.fits
    peak = plan.peak_device
    assert peak.memory_bytes["total"] <= peak.capacity_bytes
    _, default, _ = _decisions(_cfg(SEVEN_B[:-1]))
    assert not default.fits  # before: "fits" with nothing offloaded, then out of memory
    assert default.peak_device.peak_role == "actor_infer"


def test_auto_engine_and_cpu_dtypes_are_what_runs() -> None:
    reqs, plan, args = _decisions(_cfg([], gpus=8, model="qwen2.5-7b"))
    assert args.infer.engine == reqs["actor_infer"].resolved_strategy
    # the run's own choice: vllm on GPUs, installed here or not (the launch checks it)
    assert args.infer.engine == resolve_engine("auto", on_gpu=True, check=False)
    assert args.infer.engine == "vllm"
    reqs, plan, args = _decisions(_cfg([], gpus=0, model="tiny-random"))
    assert args.infer.engine == resolve_engine("auto")  # a CPU: what is installed
    assert plan.mode == "cpu"
    assert args.precision == "fp32"
    assert args.infer.dtype == "float32"
    assert all(r.param_bytes == 4 for r in reqs.values() if r.role != "env")


def test_offload_when_idle_on_a_role_that_cannot_leave_its_gpu_is_refused() -> None:
    with pytest.raises(ConfigError, match="devices.reference.offload_when_idle: only actor_infer"):
        plan_recipe(_cfg([*SEVEN_B, "devices.reference.offload_when_idle=true"]))


def test_a_bf16_mixed_hf_worker_computes_in_bf16_and_keeps_fp32_weights(tiny_model) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1, precision="bf16-mixed"
        )
    )
    ids = torch.tensor([[1, 2, 3, 4]])
    with worker._compute():
        logits = worker.model(input_ids=ids).logits
    assert logits.dtype == torch.bfloat16  # autocast: bf16 compute ...
    assert all(p.dtype == torch.float32 for p in worker.model.parameters())  # fp32 master
    plain = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    assert plain.model(input_ids=ids).logits.dtype == torch.float32
    with pytest.raises(ValueError, match="precision 'fp16'"):
        ActorTrainWorker(
            TrainedModelArgs(
                str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1, precision="fp16"
            )
        )


def test_deepspeed_gets_its_bf16_switch(monkeypatch) -> None:
    """`make_trainer` tells DeepSpeed of the plan's precision (its `bf16` switch)."""
    from rollcli.strategies import deepspeed_train
    from rollcli.strategies.train_engines import TrainStrategy, make_trainer
    from rollcli.strategies.trainer import TrainerArgs

    seen: list[dict] = []

    class Recorded:  # the arguments DeepSpeedTrainer is built with, without DeepSpeed
        def __init__(self, model, args, **options) -> None:  # noqa: ANN001
            seen.append({"args": args, **options})

    monkeypatch.setattr(deepspeed_train, "DeepSpeedTrainer", Recorded)
    args = TrainerArgs(lr=1e-5)
    for precision in ("bf16-mixed", "fp32"):
        make_trainer(TrainStrategy("deepspeed", zero_stage=3), None, args, precision=precision)
    assert [(s["bf16"], s["zero_stage"], s["args"]) for s in seen] == [
        (True, 3, args),
        (False, 3, args),
    ]
    config = deepspeed_train.deepspeed_config(zero_stage=3, grad_clip=1.0, bf16=seen[0]["bf16"])
    assert config["bf16"] == {"enabled": True}


def test_an_fp32_trainer_syncs_into_a_bf16_engine(tiny_model) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    train = ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1, precision="bf16-mixed"
        )
    )
    infer = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1, dtype="bfloat16"))
    assert infer.weight_dtype() == "bfloat16"
    with torch.no_grad():
        for p in train.model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    send_weights(train.model, infer.model, dtype=torch_dtype(infer.weight_dtype()))
    for (name, a), b in zip(
        train.model.state_dict().items(), infer.model.state_dict().values(), strict=True
    ):
        assert b.dtype == torch.bfloat16
        assert torch.equal(a.to(torch.bfloat16), b), name


def test_a_saved_gpu_recipe_plans_again_on_resume() -> None:
    """`roll resume` re-plans the run's saved recipe.yaml, where every key is written out:
    the unset offload_when_idle of the other roles must not read as a user's `true`."""
    import yaml

    from rollcli.config.loader import dump_recipe, validate_recipe

    cfg = _cfg(SEVEN_B)
    saved = validate_recipe(yaml.safe_load(dump_recipe(cfg)))
    assert saved.devices.actor_train.offload_when_idle is None
    _, plan, args = _decisions(saved)
    assert plan.fits and args.infer.options.sleep_mode is True


def test_the_critic_worker_gets_the_critics_micro_batch_size(tiny_model) -> None:
    """`critic.micro_batch_size` is what the plan sized the critic's memory for and what its
    advice names; the critic's value forwards and updates run with it, not with
    `train.micro_batch_size`."""
    from rollcli.workers.critic import CriticWorker

    overrides = ["algorithm.advantage=gae", "critic.micro_batch_size=3", "train.micro_batch_size=8"]
    cfg = _cfg(overrides, gpus=0, model="tiny-random")
    reqs, plan, args = _decisions(cfg)
    assert reqs["critic"].micro_batch == 3 and args.critic_micro_batch == 3
    sizes = {w.role: w for w in plan.workers}
    ctx = BuildContext(cfg, args, str(tiny_model), None, sizes)
    critic_args = worker_args(ctx, "critic", 0)
    assert critic_args.micro_batch_size == 3
    critic = CriticWorker(critic_args)
    forwards = []
    critic.model.register_forward_hook(lambda m, inp, out: forwards.append(1))
    tensors = rollout_tensors([[1, 2]] * 7, [[3, 4]] * 7, pad_id=0)
    critic.compute_values(Batch(tensors))
    assert len(forwards) == 3  # 7 rows, 3 at a time


def test_the_rollout_precision_reaches_the_engine(tiny_model) -> None:
    """`rollout.precision`: bf16 on a GPU plan is the engine's dtype; int8 on a CPU plan
    reaches the hf engine, which then holds int8 copies of its linears."""
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    reqs, _, args = _decisions(_cfg(["rollout.engine=vllm", "rollout.precision=fp32"]))
    assert reqs["actor_infer"].param_bytes == 4 and args.infer.dtype == "float32"
    assert not args.infer.int8
    cpu = _cfg(["rollout.engine=hf", "rollout.precision=int8"], gpus=0, model="tiny-random")
    reqs, _, args = _decisions(cpu)
    assert reqs["actor_infer"].param_bytes == 4 and args.infer.int8 is True
    assert reqs["actor_infer"].int8_copies and not reqs["actor_train"].int8_copies
    # the plan counts the copies beside the fp32 weights: 1.01 bytes per parameter
    from dataclasses import replace

    from rollcli.models.registry import param_count
    from rollcli.planning.from_recipe import model_spec
    from rollcli.planning.role_memory import estimate_role

    spec, infer = model_spec(str(tiny_model)), reqs["actor_infer"]
    kw = {"ranks": 1, "capacity_bytes": None, "on_cpu": True, "colocated": False}
    with_copies = estimate_role(infer, spec, **kw).active
    without = estimate_role(replace(infer, int8_copies=False), spec, **kw).active
    assert with_copies.weights - without.weights == math.ceil(1.01 * param_count(spec))
    assert with_copies.kv_cache == without.kv_cache
    worker = ActorInferWorker(
        ActorInferArgs(str(tiny_model), num_threads=1, dtype=args.infer.dtype, int8=args.infer.int8)
    )
    assert worker.engine.int8 is not None and len(worker.engine.int8.linears) > 0


def test_the_hf_engine_decodes_the_planned_samples_at_a_time(tiny_model) -> None:
    """On GPUs the hf engine's memory is planned for `max_num_seqs` samples at once: it
    decodes that many (not its CPU default of 64); a CPU plan leaves the engine's own."""
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    gpu = _cfg(["rollout.engine=hf", "devices.actor_infer.max_num_seqs=128"], gpus=1,
               model="qwen2.5-0.5b")  # fmt: skip
    reqs, _, args = _decisions(gpu)
    assert reqs["actor_infer"].max_num_seqs == 128 and args.infer.decode_batch == 128
    reqs, _, args = _decisions(_cfg(["rollout.engine=hf"], gpus=0, model="tiny-random"))
    assert args.infer.decode_batch is None
    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1, decode_batch=128))
    assert worker.engine.decode_batch == 128 and not worker.engine.static  # CPU: dynamic


def test_the_args_objects_of_a_cpu_rlvr_math_plan(tiny_model) -> None:
    """What `build_clusters` hands each role of `roll train rlvr-math --model tiny-random`:
    the args objects the worker table builds from the run's real plan, field by field."""
    from rollcli.planning.role_table import roles_for
    from rollcli.strategies.lora import LoraSpec
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_infer import ActorInferArgs
    from rollcli.workers.reward import RewardArgs
    from rollcli.workers.trained_model import TrainedModelArgs

    cfg = _cfg([], gpus=0, model="tiny-random")
    reqs, plan, planned = _decisions(cfg)
    sizes = {w.role: w for w in plan.workers}
    ctx = BuildContext(cfg, planned, str(tiny_model), None, sizes)
    built = {role.name: worker_args(ctx, role.name, 0) for role in roles_for(cfg)}
    assert list(built) == [w.role for w in plan.workers]
    train, infer, reward = built["actor_train"], built["actor_infer"], built["reward"]
    assert isinstance(train, TrainedModelArgs)
    assert train.model_path == str(tiny_model) and train.seed == cfg.seed
    assert train.trainer == TrainerArgs(
        lr=cfg.train.lr,
        betas=cfg.train.betas,
        weight_decay=cfg.train.weight_decay,
        grad_clip=cfg.train.grad_clip,
        warmup_steps=cfg.train.warmup_steps,
        total_steps=cfg.train.steps,
        lr_schedule=cfg.train.lr_schedule,
        lr_decay_steps=cfg.train.lr_decay_steps,
        min_lr_ratio=cfg.train.min_lr_ratio,
    )
    assert train.strategy == planned.strategy and train.strategy.name == "hf"
    assert reqs["actor_train"].param_bytes == 4 and train.precision == planned.precision == "fp32"
    assert train.lora == LoraSpec.from_section(cfg.train.lora)
    assert (train.rank, train.world_size) == (0, sizes["actor_train"].ranks)
    assert (train.num_threads, train.num_gpus) == (sizes["actor_train"].threads, 0.0)
    assert infer == ActorInferArgs(
        model_path=str(tiny_model),
        engine=reqs["actor_infer"].resolved_strategy,
        engine_options=planned.infer.options,
        seed=cfg.seed,
        rank=0,
        num_threads=sizes["actor_infer"].threads,
        dtype="float32",
        bf16_linears=cfg.rollout.precision == "bf16",
    )
    assert reward == RewardArgs(
        cfg.reward.fn,
        options=cfg.reward.worker_options,
        timeout_s=cfg.reward.timeout_s,
        convention=cfg.reward.convention,
    )
    if "reference" in built:
        assert built["reference"].dtype == "float32"
