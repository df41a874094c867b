"""`roll train rlvr-math --model tiny-random-moe` (a 2-layer Qwen3-MoE, 4 experts, top-2)
through the real CLI, Ray and workers, with every trainer that runs on a CPU: `hf` (the
default tier), `fsdp2` over two gloo ranks and `deepspeed` ZeRO-3 (both with gradient
checkpointing) and ZeRO-2 (slow tier); and LoRA (hf, fsdp2; slow tier).

A coin-flip reward (coin_rewards.py) gives groups whose samples differ, so every step has
advantages and moves the weights: the experts', the router's and attention's. The checkpoint
is a Hugging Face folder in the hub's layout (one tensor per expert: transformers 5 fuses
them on load, splits them on save) that `AutoModelForCausalLM` loads without a missing or
unexpected tensor, holding exactly the trainer's weights: for fsdp2 and deepspeed those of
their own sharded states, for hf what `roll resume` loads back (`load_saved_weights`; the
kill-and-resume run is tests/runs/test_moe_resume.py's). The sharded runs are resumed for a
third step from their own states.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from roll_subprocess import roll

SMALL = [
    "--model", "tiny-random-moe", "--save-every", "1",
    "rollout.batch_size=8", "rollout.group_size=4", "rollout.max_new_tokens=8",
    "data.val_size=4", "run.eval_every=0", "reward.fn=coin_rewards:coin",
]  # fmt: skip
FSDP2 = ["train.strategy=fsdp2", "train.num_workers=2"]
CHECKPOINTING = "train.gradient_checkpointing=true"  # each layer's forward again in backward
STRATEGIES = {
    "fsdp2": [*FSDP2, CHECKPOINTING],
    "zero3": ["train.strategy=deepspeed", "devices.actor_train.zero_stage=3", CHECKPOINTING],
    "zero2": ["train.strategy=deepspeed", "devices.actor_train.zero_stage=2"],
}


def _train(runs: Path, run_id: str, *extra: str, resume: bool = False) -> Path:
    """A 2-step run (and with `resume`, `roll resume` for a third step)."""
    args = ["train", "rlvr-math", "--steps", "2", "--runs-dir", str(runs), "--run-id", run_id]
    res = roll(*args, *SMALL, *extra, cwd=runs)
    assert res.returncode == 0, res.stderr[-3000:]
    if resume:
        res = roll("resume", run_id, "--runs-dir", str(runs), "train.steps=3", cwd=runs)
        assert res.returncode == 0, res.stderr[-3000:]
    run = runs / run_id
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "actor/grad_norm" in r]
    assert [r["step"] for r in steps] == [1, 2, 3][: 3 if resume else 2]
    assert all(r["actor/grad_norm"] > 0 and r["sync/verified"] == 1 for r in steps)
    assert ("resuming from checkpoint step-2" in (run / "events.log").read_text()) == resume
    return run


def _loaded(folder: Path) -> torch.nn.Module:
    """The folder through `AutoModelForCausalLM`, which must find every tensor it needs."""
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(str(folder), output_loading_info=True)
    assert type(model).__name__ == "Qwen3MoeForCausalLM"
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return model


def _check_trained(ckpt: Path, tiny_moe_model: Path) -> torch.nn.Module:
    """Every kind of weight moved from the initial model's; the folder loads."""
    from safetensors.torch import load_file

    saved, init = (
        load_file(ckpt / "model.safetensors"),
        load_file(tiny_moe_model / "model.safetensors"),
    )
    assert saved.keys() == init.keys()  # the hub's layout, as the model came
    assert "model.layers.0.mlp.experts.3.down_proj.weight" in saved
    moved = {k for k in saved if not torch.equal(saved[k], init[k])}
    for kind in (".mlp.experts.", ".mlp.gate.", ".self_attn.q_proj.", "embed_tokens"):
        assert any(kind in k for k in moved), kind
    return _loaded(ckpt)


def _assert_same_weights(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    own = model.state_dict()
    assert {k for k in own if k not in state} <= {"lm_head.weight"}  # tied to the embedding
    for name, tensor in state.items():
        assert torch.equal(own[name], tensor), name


def test_hf_trains_an_moe_into_a_checkpoint_resume_loads(tmp_path, tiny_moe_model) -> None:
    run = _train(tmp_path, "hf")
    model = _check_trained(run / "checkpoints" / "step-2", tiny_moe_model)
    # what `roll resume` loaded: the initial model, the folder's weights loaded into it
    from rollcli.strategies.hf_model import load_causal_lm, load_saved_weights

    resumed = load_causal_lm(tiny_moe_model)
    load_saved_weights(resumed, run / "checkpoints" / "step-2", device="cpu")
    _assert_same_weights(model, resumed.state_dict())
    ids = torch.tensor([[1, 400, 52, 9, 1200, 7]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, resumed(ids).logits)


def _trainer_state(ckpt: Path, strategy: str) -> dict[str, torch.Tensor]:
    """The trainer's own weights, from its sharded states in the checkpoint (fsdp2's DCP
    shards; DeepSpeed's fp32 partitions, which its zero_to_fp32 gathers)."""
    if strategy == "fsdp2":
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

        dcp_to_torch_save(ckpt / "fsdp2", ckpt.parent / "fsdp2.pt")
        return torch.load(ckpt.parent / "fsdp2.pt")["train"]["model"]
    from rollcli.strategies.deepspeed_train import import_deepspeed

    import_deepspeed(on_gpu=False)
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    return get_fp32_state_dict_from_zero_checkpoint(str(ckpt / "deepspeed"), tag="state")


@pytest.mark.slow  # ~1 min each on 2 busy cores: a 2-step run, then a resumed third step
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_sharded_trainers_train_an_moe(tmp_path, tiny_moe_model, strategy) -> None:
    if strategy != "fsdp2":
        pytest.importorskip("deepspeed")
    run = _train(tmp_path, strategy, *STRATEGIES[strategy], resume=True)
    ckpt = run / "checkpoints" / "step-2"
    model = _check_trained(ckpt, tiny_moe_model)
    _assert_same_weights(model, _trainer_state(ckpt, strategy))


@pytest.mark.slow  # ~40-60 s each: a 2-step run
@pytest.mark.parametrize("strategy", ["hf", "fsdp2"])
def test_lora_adapts_the_experts_and_leaves_the_router_frozen(tmp_path, tiny_moe_model, strategy):
    from safetensors.torch import load_file

    extra = FSDP2 if strategy == "fsdp2" else []
    args = ["train", "rlvr-math-lora", "--steps", "2", "--runs-dir", str(tmp_path)]
    lora = ["train.lr=1e-2", "train.lora.r=4", "train.lora.alpha=8"]
    res = roll(*args, "--run-id", "lora", *SMALL, *lora, *extra, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    line = (
        "LoRA on an MoE model: adapting k_proj, o_proj, q_proj, v_proj and the expert weights "
        "(experts.down_proj, experts.gate_up_proj: peft's target_parameters, a rank-4 adapter "
        "per expert); the router (mlp.gate) stays frozen"
    )
    assert " ".join(res.stderr.split()).count(line) == 1  # one line (wrapped on the console)
    step2 = tmp_path / "lora" / "checkpoints" / "step-2"
    assert line in (tmp_path / "lora" / "events.log").read_text()
    adapter = load_file(step2 / "adapter" / "adapter_model.safetensors")
    for layer in (0, 1):  # gate_up_proj's wrapper is inside down_proj's: `experts.base_layer`
        for where in ("mlp.experts.base_layer.lora_B", "mlp.experts.lora_B"):
            tensor = next(t for k, t in adapter.items() if f"layers.{layer}.{where}" in k)
            assert tensor.abs().sum() > 0, (layer, where)  # B starts at 0: it trained
    assert not any(".mlp.gate." in k for k in adapter)
    # the merged policy: a plain folder in the hub's layout; the router is the base's
    _loaded(step2)
    merged, init = (
        load_file(step2 / "model.safetensors"),
        load_file(tiny_moe_model / "model.safetensors"),
    )
    assert merged.keys() == init.keys()
    for name, tensor in merged.items():  # bf16 where bf16-mixed kept the frozen base in bf16
        moved = not torch.equal(tensor, init[name].to(tensor.dtype))
        assert moved == any(k in name for k in ("mlp.experts.", "_proj.")), name
