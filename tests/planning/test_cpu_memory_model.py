"""The CPU memory model's figures against hand computations (docs/planning.md, "On the
CPU"): each role a process with its runtime, the micro-batch token budget and shared-prefix
packing with its attention masks, the layer's saved tensors as counted, the allocator's
slack on a training pass, the chunked LM head's buffers instead of whole logits, and
distill's student."""

from __future__ import annotations

from rollcli.config.loader import load_recipe
from rollcli.models.registry import MODELS, param_count
from rollcli.planning.from_recipe import plan_recipe
from rollcli.planning.memory import (
    CPU_ALLOCATOR_SLACK,
    CPU_DRIVER_BYTES,
    CPU_PROCESS_BYTES,
    HEAD_CHUNK_TOKENS,
    KEEP_LOGITS_BYTES,
    chunked_head_bytes,
)

SMOL = MODELS["smollm2-135m"]
PSI = param_count(SMOL)
H, V, L = SMOL.hidden_size, SMOL.vocab_size, SMOL.num_layers
Q = SMOL.num_attention_heads * SMOL.head_dim
KV = SMOL.num_kv_heads * SMOL.head_dim
MLP = SMOL.intermediate_size
PER_TOKEN_LAYER = 4 * (4 * H + 2 * Q + 2 * KV + 3 * MLP)  # fp32, the stand-in's
COUNTED_LAYER = 4 * (5 * H + 3 * Q + 2 * KV + 4 * MLP)  # fp32, as counted on the CPU


def slack(activations: int) -> int:
    """A CPU training pass's activations with the blocks glibc keeps resident."""
    return int(activations * (1 + CPU_ALLOCATOR_SLACK))


def masks(groups: int, width: int) -> int:
    """Packed rows' bool mask and fp32 additive mask."""
    return groups * (1 + 4) * width * width


def test_the_planner_copies_the_heads_constants() -> None:
    from rollcli.strategies import lm_head

    assert HEAD_CHUNK_TOKENS == lm_head.HEAD_CHUNK_TOKENS
    assert KEEP_LOGITS_BYTES == lm_head.KEEP_LOGITS_BYTES


def test_chunked_head_by_hand() -> None:
    # a forward keeps two [min(n, 256), V] fp32 scratch buffers
    assert chunked_head_bytes(SMOL, scored_tokens=1000, train=False) == 2 * 4 * 256 * V
    # training 14 rows x 32 response tokens: the kept logits (88 MB < 256 MiB) and the
    # head's [V, h] weight-gradient buffer come on top
    n = 14 * 32
    assert chunked_head_bytes(SMOL, scored_tokens=n, train=True) == (
        2 * 4 * 256 * V + 4 * n * V + 4 * V * H
    )
    # sft's 4 x 512 positions: 403 MB of logits are above 256 MiB, so none are kept
    assert chunked_head_bytes(SMOL, scored_tokens=2048, train=True) == 2 * 4 * 256 * V + 4 * V * H


def test_rlvr_math_cpu_plan_by_hand() -> None:
    cfg, _ = load_recipe("rlvr-math", [])
    assert (cfg.train.micro_batch_size, cfg.train.micro_batch_tokens) == (16, 4096)
    assert (cfg.data.max_prompt_tokens, cfg.rollout.max_new_tokens) == (256, 32)
    assert cfg.shared_prefix and cfg.rollout.group_size == 5
    plan = plan_recipe(cfg)
    # 16 samples of groups of 5 = 4 packed rows (5, 5, 5, 1): a prompt each, 16 responses;
    # a row's mask is as wide as a full group's: 256 + 5 x 32 = 416
    tokens = 4 * 256 + 16 * 32
    train = plan.role_memory["actor_train"].active
    head = 2 * 4 * 256 * V + 4 * 16 * 32 * V + 4 * V * H
    assert (train.weights, train.grads, train.optimizer) == (4 * PSI, 4 * PSI, 8 * PSI)
    assert train.activations == slack(L * COUNTED_LAYER * tokens + head) + masks(4, 416)
    assert train.runtime == CPU_PROCESS_BYTES
    reference = plan.role_memory["reference"].active
    assert reference.weights == 4 * PSI
    assert reference.activations == PER_TOKEN_LAYER * tokens + 2 * 4 * 256 * V + masks(4, 416)
    assert reference.total == 4 * PSI + reference.activations + CPU_PROCESS_BYTES
    reward = plan.role_memory["reward"].active
    assert reward.total == reward.runtime == CPU_PROCESS_BYTES  # a process, no model
    host = plan.devices[0].memory_bytes
    assert host["total"] == sum(m.active.total for m in plan.role_memory.values()) + (
        CPU_DRIVER_BYTES
    )


def test_plain_rows_fill_the_token_budget_and_dpo_counts_two_rows_a_pair() -> None:
    cfg, _ = load_recipe("rlvr-math", ["train.shared_prefix=false"])
    train = plan_recipe(cfg).role_memory["actor_train"].active
    rows = 4096 // 288  # 14 of the 16 rows of 288 tokens fit the token budget
    # shorter rows fill the budget: 4096 tokens, of which the 64 beyond 14 rows may be scored
    scored = rows * 32 + 4096 - rows * 288
    head = 2 * 4 * 256 * V + 4 * scored * V + 4 * V * H
    assert train.activations == slack(L * COUNTED_LAYER * 4096 + head)
    dpo, _ = load_recipe("dpo", [])
    # pairs: 16 rows of 384, 10 fit 4096 tokens, and shorter ones fill the budget
    assert dpo.train.micro_batch_size == 8
    assert dpo.data.max_prompt_tokens + dpo.dpo.max_response_tokens == 384
    reference = plan_recipe(dpo).role_memory["reference"].active
    assert reference.activations == PER_TOKEN_LAYER * 4096 + 2 * 4 * 256 * V


def test_an_agentic_micro_batch_is_planned_at_the_token_budget() -> None:
    """webshop's 4 conversations of up to 2,560 tokens: the budget holds one at the longest,
    but two or more shorter ones fill all of its 4,096 (plain rows: webshop does not pack)."""
    cfg, _ = load_recipe("webshop", ["warmup=null"])
    assert (cfg.train.micro_batch_size, cfg.agentic.max_context_tokens) == (4, 2560)
    assert not cfg.shared_prefix
    train = plan_recipe(cfg).role_memory["actor_train"].active
    scored = 2560 - 256 + 4096 - 2560
    head = 2 * 4 * 256 * V + 4 * V * H  # 3,840 scored positions' logits exceed 256 MiB
    assert 4 * scored * V > 256 * 2**20
    assert train.activations == slack(L * COUNTED_LAYER * 4096 + head)


def test_distill_plans_its_student_and_keeps_whole_logits() -> None:
    cfg, _ = load_recipe("distill", [])
    plan = plan_recipe(cfg)
    teacher = plan.role_memory["teacher"].active
    tokens = min(cfg.train.micro_batch_size, 4096 // 512) * 512
    assert teacher.activations == PER_TOKEN_LAYER * tokens + 4 * tokens * V
    # the student is the teacher cut to a third of its layers: 10 of 30
    per_layer = (PSI - V * H - H) // L  # smollm2 ties its head to the embedding
    student = V * H + 10 * per_layer + H
    train = plan.role_memory["actor_train"].active
    assert (train.weights, train.grads, train.optimizer) == (4 * student, 4 * student, 8 * student)
    assert train.activations == slack(10 * COUNTED_LAYER * tokens + 4 * tokens * V)


def test_a_gpu_plan_has_no_process_runtime() -> None:
    gpu, _ = load_recipe("rlvr-math", [])
    gpu_plan = plan_recipe(gpu, gpus=1, gpu_kind="h100-80g")
    assert all(m.active.runtime == 0 for m in gpu_plan.role_memory.values())


def test_agentic_hf_engine_counts_the_turn_cache() -> None:
    cfg, _ = load_recipe("agentic-frozenlake", ["warmup=null"])
    infer = plan_recipe(cfg).role_memory["actor_infer"].active
    without, _ = load_recipe("agentic-frozenlake", ["warmup=null", "agentic.turn_cache_mib=0"])
    base = plan_recipe(without).role_memory["actor_infer"].active
    assert infer.kv_cache - base.kv_cache == cfg.agentic.turn_cache_mib * 2**20 == 1024 * 2**20


def test_agentic_hf_engine_plans_whole_conversations() -> None:
    """A turn's KV buffer holds every concurrent episode's conversation, up to
    agentic.max_context_tokens, beside the first turn's plain prefill of 256 tokens (its own
    cache while the buffer fills); a measured run at ~720 of 1536 tokens: docs/planning.md."""
    cfg, _ = load_recipe("agentic-frozenlake", ["warmup=null", "agentic.turn_cache_mib=0"])
    infer = plan_recipe(cfg).role_memory["actor_infer"].active
    episodes = cfg.agentic.groups_per_step * cfg.agentic.group_size
    per_token = 2 * L * KV * 4
    assert infer.kv_cache == episodes * (1536 + 256) * per_token
    shorter, _ = load_recipe(
        "agentic-frozenlake",
        ["warmup=null", "agentic.turn_cache_mib=0", "agentic.max_context_tokens=768"],
    )
    small = plan_recipe(shorter).role_memory["actor_infer"].active
    assert small.kv_cache == episodes * (768 + 256) * per_token
