"""LoRA on an MoE model (tiny-random-moe: 2 layers, 4 experts), without Ray: peft adapts the
attention linears and the experts' 3-D weights (`target_parameters`), the router stays
frozen; the merged weights (weight sync, checkpoint) are peft's own merge; the adapter
resumes bitwise; fsdp2's step is hf's. The CLI run: tests/e2e/test_moe_cli.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.models.registry import get_model_spec
from rollcli.planning.lora_params import lora_param_count
from rollcli.strategies import lora as lora_adapters
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.lora import LoraSpec
from rollcli.strategies.train_engines import TrainStrategy
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

SPEC = LoraSpec(r=4, alpha=8.0)  # default targets: q, k, v, o
ARGS = PolicyUpdateArgs(micro_batch_size=2)
EXPERTS = ("mlp.experts.base_layer.lora_", "mlp.experts.lora_")  # gate_up_proj's, down_proj's


def _worker(path: Path, strategy: str = "hf") -> ActorTrainWorker:
    return ActorTrainWorker(
        TrainedModelArgs(
            str(path),
            trainer=TrainerArgs(lr=1e-2),
            seed=0,
            lora=SPEC,
            strategy=TrainStrategy(strategy),
        )
    )


def _batch(worker: ActorTrainWorker) -> Batch:
    prompts, responses = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4]], [[10, 11], [13], [14], [16]]
    batch = Batch(rollout_tensors(prompts, responses, worker.tokenizer.pad_token_id))
    adv = torch.tensor([[1.0] * 2, [-1.0] * 2, [1.0] * 2, [-0.5] * 2]) * batch["response_mask"]
    batch.set("advantages", adv)
    return batch


@pytest.fixture(scope="module")
def trained(tiny_moe_model) -> tuple[ActorTrainWorker, dict]:
    worker = _worker(tiny_moe_model)
    metrics = worker.train_step(_batch(worker), ARGS)
    return worker, metrics


def test_the_attention_and_every_experts_weight_are_adapted_the_router_not(trained) -> None:
    worker, _ = trained
    trainable = {n for n, p in worker.model.named_parameters() if p.requires_grad}
    assert all(".lora_A." in n or ".lora_B." in n for n in trainable)
    for layer in (0, 1):
        for where in (*EXPERTS, "self_attn.q_proj.lora_", "self_attn.o_proj.lora_"):
            assert any(f"layers.{layer}.{where}" in n for n in trainable), (layer, where)
    assert not any(".mlp.gate." in n for n in trainable)
    # the planner counts what peft builds (r per expert on gate_up_proj and down_proj)
    spec = get_model_spec("tiny-random-moe")
    count = lora_param_count(spec, r=SPEC.r, target_modules=SPEC.target_modules)
    assert worker.trainable_parameters()[0] == count
    assert worker.lora_coverage() == (
        "LoRA on an MoE model: adapting k_proj, o_proj, q_proj, v_proj and the expert weights "
        "(experts.down_proj, experts.gate_up_proj: peft's target_parameters, a rank-4 adapter "
        "per expert); the router (mlp.gate) stays frozen"
    )


@pytest.mark.parametrize(
    ("targets", "count"),
    [("all-linear", 21504), (("gate_proj", "up_proj", "down_proj"), 14336)],
)
def test_any_target_names_adapt_the_experts_at_rank_r_and_never_the_router(
    tiny_moe_model, targets, count
) -> None:
    """peft 0.21 maps transformers-4 names (and `all-linear` as transformers 4 saw the
    model) to the fused experts at rank 2r and to the router; lora_moe.py keeps rank r and
    the router frozen, as the planner counts."""
    model = lora_adapters.apply_lora(
        load_causal_lm(tiny_moe_model, train=True), LoraSpec(r=4, alpha=8.0, target_modules=targets)
    )
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert not any(".mlp.gate." in n for n in trainable)
    assert lora_adapters.trainable_count(model)[0] == count
    spec = get_model_spec("tiny-random-moe")
    assert lora_param_count(spec, r=4, target_modules=targets) == count
    with pytest.raises(ValueError, match="names gate, which this MoE model does not have"):
        lora_adapters.apply_lora(
            load_causal_lm(tiny_moe_model, train=True), LoraSpec(target_modules=("q_proj", "gate"))
        )


def test_the_merged_weights_are_peft_s_merge_and_the_checkpoint_resumes(
    tiny_moe_model, trained, tmp_path
) -> None:
    worker, metrics = trained
    assert metrics["grad_norm"] > 0
    model = worker.model
    experts_b = [p for n, p in model.named_parameters() if "experts" in n and ".lora_B." in n]
    assert all(p.abs().sum() > 0 for p in experts_b)  # B starts at 0: the step moved them
    merged = copy.deepcopy(model).merge_and_unload().state_dict()
    value = lora_adapters.merged_value(model)
    tensors = lora_adapters.base_tensors(model)
    assert tensors.keys() == merged.keys()
    for name, tensor in tensors.items():
        torch.testing.assert_close(value(name, tensor), merged[name], msg=name)
    down = "model.layers.1.mlp.experts.down_proj"
    assert not torch.equal(value(down, tensors[down]), tensors[down])

    worker.save_pretrained(str(tmp_path))
    adapter = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert any("experts.base_layer.lora_B" in k for k in adapter)  # gate_up_proj's adapters
    plain = ActorTrainWorker(TrainedModelArgs(str(tmp_path), trainer=TrainerArgs(lr=1e-2), seed=0))
    torch.testing.assert_close(
        plain.compute_logprobs(_batch(plain)), worker.compute_logprobs(_batch(worker))
    )
    # resume: the adapters back on a freshly loaded base, bit for bit
    fresh = _worker(tiny_moe_model)
    lora_adapters.load_adapter(fresh.model, tmp_path / "adapter")
    adapters = {n: p for n, p in fresh.model.named_parameters() if ".lora_" in n}
    for name, p in model.named_parameters():
        if ".lora_" in name:
            assert torch.equal(adapters[name], p), name


def test_fsdp2_trains_the_expert_adapters_as_hf_does(tiny_moe_model, monkeypatch) -> None:
    """One gloo rank: peft's expert wrapper (a parametrization added in every forward)
    under `fully_shard`. The hf side computes its logits as FSDP2's model does (its own
    forward, not roll's chunked head: tests/strategies/test_fsdp2_train.py says why)."""
    import torch.distributed as dist

    import rollcli.strategies.hf_model as hf_model

    monkeypatch.setattr(hf_model, "plain_head", lambda model: None)
    opened_before = dist.is_initialized()
    try:
        ref, fsdp = _worker(tiny_moe_model), _worker(tiny_moe_model, "fsdp2")
        m_ref, m_fsdp = ref.train_step(_batch(ref), ARGS), fsdp.train_step(_batch(fsdp), ARGS)
        assert m_fsdp["grad_norm"] == pytest.approx(m_ref["grad_norm"], rel=1e-5)
        with fsdp._full_weights() as model:
            got = {n: p for n, p in model.named_parameters() if ".lora_" in n}
        want = {n: p for n, p in ref.model.named_parameters() if ".lora_" in n}
        assert got.keys() == want.keys()
        assert any("experts" in n for n in got)
        for name, p in got.items():
            torch.testing.assert_close(p, want[name], rtol=0, atol=1e-6, msg=name)
    finally:
        if dist.is_initialized() and not opened_before:
            dist.destroy_process_group()
