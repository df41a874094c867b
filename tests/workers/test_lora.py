"""LoRA on actor_train (strategies/lora.py), without Ray: what trains, the reference with
adapters off, the merged weight sync, checkpoints that resume bitwise, and the exports."""

from __future__ import annotations

import copy
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.runs.export import ExportError, export_policy
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.lora import LoraSpec, apply_lora
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
from rollcli.workers.trained_model import TrainedModelArgs

SPEC = LoraSpec(r=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9]]
ARGS = PolicyUpdateArgs(micro_batch_size=2)


def _bf16_lora(model) -> TrainedModelArgs:  # noqa: ANN001
    """LoRA adapters on `model`, trained in bf16-mixed."""
    args = TrainedModelArgs(str(model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    return replace(args, lora=SPEC, precision="bf16-mixed")


def _batch(worker: ActorTrainWorker) -> Batch:
    batch = Batch(
        rollout_tensors(PROMPTS, [[10, 11, 12], [13], [14, 15]], worker.tokenizer.pad_token_id)
    )
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3, [1.0] * 3]) * batch["response_mask"]
    batch.set("advantages", adv)
    return batch


def _worker(tiny_model: Path) -> ActorTrainWorker:
    return ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1, lora=SPEC)
    )


@pytest.fixture(scope="module")
def trained(tiny_model: Path) -> ActorTrainWorker:
    """One real policy update: the adapters' B moved away from 0."""
    worker = _worker(tiny_model)
    worker.train_step(_batch(worker), ARGS)
    return worker


def _adapters(worker: ActorTrainWorker) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in worker.model.named_parameters() if "lora_" in n}


def test_only_the_adapters_train_and_hold_optimizer_state(tiny_model, trained) -> None:
    trainable = {n for n, p in trained.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # r (in + out) per adapted linear, 2 layers: q_proj 128 -> 128, v_proj 128 -> 64
    assert sum(p.numel() for p in trained.model.parameters() if p.requires_grad) == (
        2 * 4 * ((128 + 128) + (128 + 64))
    )
    optimizer = trained.trainer.optimizer
    with_state = {id(p) for p in optimizer.state}
    params = dict(trained.model.named_parameters())
    assert with_state == {id(params[n]) for n in trainable}
    # the base weights are the loaded ones, bit for bit; the B matrices moved
    base = load_causal_lm(tiny_model).state_dict()
    for name, tensor in trained.model.get_base_model().state_dict().items():
        if ".lora_" not in name:
            assert torch.equal(tensor, base[name.replace(".base_layer.", ".")]), name
    assert all(p.abs().sum() > 0 for n, p in _adapters(trained).items() if "lora_B" in n)


def test_the_reference_is_the_base_model_with_adapters_off(tiny_model, trained) -> None:
    batch = _batch(trained)
    ref = trained.compute_ref_logprobs(batch, micro_batch_size=2)
    base = ReferenceWorker(ReferenceArgs(str(tiny_model))).compute_logprobs(
        batch, micro_batch_size=2
    )
    torch.testing.assert_close(ref, base, rtol=0, atol=1e-6)
    policy = trained.compute_logprobs(batch, micro_batch_size=2)
    mask = batch["response_mask"].bool()
    assert (policy - base)[mask].abs().max() > 1e-4  # the adapters do change the policy
    with pytest.raises(RuntimeError, match="needs LoRA"):
        ActorTrainWorker(
            TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2))
        ).compute_ref_logprobs(batch)


def test_weight_sync_sends_the_merged_weights_under_the_base_names(tiny_model, trained) -> None:
    infer = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1))
    host, port = trained.open_weight_sync(2)
    t = threading.Thread(target=infer.init_weight_sync, args=(host, port, 1, 2))
    t.start()
    trained.connect_weight_sync()
    t.join()
    t = threading.Thread(target=infer.receive_weights)
    t.start()
    trained.broadcast_weights()
    t.join()
    merged = copy.deepcopy(trained.model).merge_and_unload().state_dict()  # peft's own merge
    got = infer.model.state_dict()
    assert list(got) == list(merged)
    for name, tensor in merged.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=1e-6, msg=name)
    assert not torch.equal(
        got["model.layers.0.self_attn.q_proj.weight"],
        load_causal_lm(tiny_model).state_dict()["model.layers.0.self_attn.q_proj.weight"],
    )


def _greedy(model, worker: ActorTrainWorker) -> list[list[int]]:  # noqa: ANN001
    from rollcli.workers.generation import generate_texts

    params = SamplingParams(n=1, max_new_tokens=8, temperature=0.0)
    return [r["token_ids"] for r in generate_texts(model, worker.tokenizer, PROMPTS, params)]


def test_merged_export_generates_the_adapted_models_greedy_text(trained, tmp_path) -> None:
    from peft import PeftModel

    ckpt = tmp_path / "run" / "step-1"
    trained.save_pretrained(str(ckpt))
    out = export_policy(ckpt, tmp_path / "merged")
    assert {p.name for p in out} >= {"model.safetensors", "config.json", "tokenizer.json"}
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    trained.model.eval()
    adapted = _greedy(trained.model, trained)
    assert _greedy(merged, trained) == adapted
    assert adapted != _greedy(load_causal_lm(trained.model_path), trained)  # not vacuous

    files = export_policy(ckpt, tmp_path / "adapter", adapter=True)
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in files}
    peft_model = PeftModel.from_pretrained(load_causal_lm(trained.model_path), tmp_path / "adapter")
    assert _greedy(peft_model.eval(), trained) == adapted


def test_adapter_export_of_a_full_run_is_refused(tiny_model, tmp_path) -> None:
    ckpt = tmp_path / "run" / "step-1"
    ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2))
    ).save_pretrained(str(ckpt))
    with pytest.raises(ExportError, match="holds no LoRA adapter") as err:
        export_policy(ckpt, tmp_path / "out", adapter=True)
    assert "export without --adapter" in err.value.hint


def test_a_resumed_worker_continues_with_bitwise_identical_adapters(tiny_model, tmp_path) -> None:
    """Save after one step, load into a fresh worker: the adapters, and the next step's
    result, are bitwise those of the worker that kept going."""
    a = _worker(tiny_model)
    a.train_step(_batch(a), ARGS)
    a.save_pretrained(str(tmp_path))
    a.save_state(str(tmp_path))
    saved = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    assert len(saved) == len(_adapters(a))
    b = _worker(tiny_model)
    b.load_state(str(tmp_path))
    for name, tensor in _adapters(a).items():
        assert torch.equal(_adapters(b)[name], tensor), name
    a.train_step(_batch(a), ARGS)
    b.train_step(_batch(b), ARGS)
    for name, tensor in _adapters(a).items():
        assert torch.equal(_adapters(b)[name], tensor), name


def test_unknown_target_modules_name_the_models_linear_layers(tiny_model) -> None:
    model = load_causal_lm(tiny_model, train=True)
    with pytest.raises(ValueError, match="train.lora.target_modules") as err:
        apply_lora(model, LoraSpec(target_modules=("qkv",)))
    assert "q_proj" in str(err.value) and "gate_proj" in str(err.value)


def test_gradient_checkpointing_with_lora_gives_the_same_update(tiny_model) -> None:
    """A frozen embedding output needs no gradient, yet the checkpointed blocks' adapters
    must still get theirs: the same step with and without checkpointing."""
    plain, ckpt = (
        ActorTrainWorker(
            TrainedModelArgs(
                str(tiny_model),
                trainer=TrainerArgs(lr=1e-2),
                num_threads=1,
                lora=SPEC,
                gradient_checkpointing=flag,
            )
        )
        for flag in (False, True)
    )
    a = plain.train_step(_batch(plain), ARGS)["grad_norm"]
    b = ckpt.train_step(_batch(ckpt), ARGS)["grad_norm"]
    assert a > 0 and b == pytest.approx(a, rel=1e-5)
    for name, tensor in _adapters(plain).items():
        torch.testing.assert_close(_adapters(ckpt)[name], tensor, rtol=1e-5, atol=1e-7)


def test_the_merged_checkpoint_saves_tied_weights_once(trained, tmp_path) -> None:
    """tiny-random ties its LM head to the embeddings, as a fully trained model's folder
    holds it: one tensor, not two."""
    trained.save_pretrained(str(tmp_path))
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert "model.embed_tokens.weight" in saved and "lm_head.weight" not in saved


def test_lora_in_bf16_mixed_keeps_the_frozen_base_in_bf16_and_trains_fp32_adapters(
    tiny_model,
) -> None:
    """The plan counts LoRA's frozen weights at 2 bytes on GPUs (no fp32 master copy): the
    worker holds them in bf16, the adapters (and their Adam states) in fp32, and trains."""
    worker = ActorTrainWorker(_bf16_lora(tiny_model))
    params = dict(worker.model.named_parameters())
    frozen = {n: p.dtype for n, p in params.items() if not p.requires_grad}
    trained_ = {n: p.dtype for n, p in params.items() if p.requires_grad}
    assert frozen and set(frozen.values()) == {torch.bfloat16}
    assert trained_ and set(trained_.values()) == {torch.float32}
    before = _adapters(worker)
    metrics = worker.train_step(_batch(worker), ARGS)
    assert torch.isfinite(torch.tensor(metrics["pg_loss"]))
    moved = [n for n, t in _adapters(worker).items() if not torch.equal(t, before[n])]
    assert moved  # the fp32 adapters took the update
    ref = worker.compute_ref_logprobs(_batch(worker), micro_batch_size=2)
    assert torch.isfinite(ref).all()


def test_lora_in_bf16_mixed_never_holds_the_base_in_fp32(tiny_model, monkeypatch) -> None:
    """The frozen base is read in bf16: a 7B base loaded in fp32 and cast afterwards peaked at
    29.5 GiB on an H200 where the plan (2 bytes/param) says 16.2 (docs/gpu.md, run 4)."""
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained.__func__
    asked: list[torch.dtype] = []

    def reading(cls, *args, **kwargs):  # the real loader, its dtype noted
        asked.append(kwargs.get("dtype"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(reading))
    ActorTrainWorker(_bf16_lora(tiny_model))
    ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1, precision="bf16-mixed"
        )
    )
    assert asked == [torch.bfloat16, torch.float32]  # full training keeps fp32 masters
