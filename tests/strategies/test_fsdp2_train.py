"""The fsdp2 strategy (torch's `fully_shard`) on one gloo rank in this process: its step is
the hf strategy's, `full_weights` gives a folder transformers loads, LoRA trains only the
adapters exactly as hf + LoRA does, and a fresh trainer resumes its checkpoint bit for bit.
Two ranks against one process: tests/distributed/test_fsdp2_ranks.py."""

from __future__ import annotations

import pytest
import torch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.strategies.fsdp2_train import CHECKPOINT_DIR, FSDP2Trainer, decoder_layers
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.lora import LoraSpec
from rollcli.strategies.train_engines import TrainStrategy
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4]]
RESPONSES = [[10, 11, 12], [13], [14, 15], [16, 17, 18]]
ARGS = PolicyUpdateArgs(micro_batch_size=2, entropy_coef=0.01)
LORA = LoraSpec(r=4, alpha=8.0)


@pytest.fixture(autouse=True)
def _one_rank_group():
    """FSDP2 opens a one-rank process group in this process; close it after each test so
    that no other test finds one. A group another test opened (DeepSpeed's, whose library
    keeps a handle to it) is left as it is."""
    import torch.distributed as dist

    opened_before = dist.is_initialized()
    yield
    if dist.is_initialized() and not opened_before:
        dist.destroy_process_group()


@pytest.fixture
def whole_logits(monkeypatch) -> None:
    """The hf side computes its logits as an FSDP2 model does (the model's own forward, not
    roll's chunked head, `lm_head.plain_head`): the two heads differ by float rounding, and
    Adam's first step turns that into differences of up to lr in the few entries whose
    gradient is near 0 (1e-3 here), which would hide what these tests compare."""
    import rollcli.strategies.hf_model as hf_model

    monkeypatch.setattr(hf_model, "plain_head", lambda model: None)


def _batch(worker: ActorTrainWorker) -> Batch:
    batch = Batch(rollout_tensors(PROMPTS, RESPONSES, worker.tokenizer.pad_token_id))
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3, [1.0] * 3, [-0.5] * 3]) * batch["response_mask"]
    batch.set("advantages", adv)
    return batch


def _worker(tiny_model, strategy: str, lora: LoraSpec | None = None) -> ActorTrainWorker:
    # a warm-up and a decay: a resumed scheduler that lost its place changes the next step
    schedule = TrainerArgs(
        lr=1e-2, grad_clip=1.0, warmup_steps=2, total_steps=3, lr_schedule="linear"
    )
    return ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            trainer=schedule,
            seed=0,
            strategy=TrainStrategy(strategy),
            lora=lora,
        )
    )


def _weights(worker: ActorTrainWorker) -> dict[str, torch.Tensor]:
    with worker._full_weights() as model:
        return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_layers_are_found_and_a_model_without_them_is_refused(tiny_model) -> None:
    model = load_causal_lm(str(tiny_model), train=True)
    assert decoder_layers(model) == list(model.model.layers)
    with pytest.raises(ValueError, match="Sequential has no list of layers"):
        decoder_layers(torch.nn.Sequential(torch.nn.Linear(2, 2)))


@pytest.mark.parametrize(
    ("option", "message"),
    [({"bf16": True}, "bf16-mixed on GPUs only"), ({"offload_params": True}, "set it to false")],
)
def test_gpu_only_options_are_refused_on_the_cpu(tiny_model, option, message) -> None:
    model = load_causal_lm(str(tiny_model), train=True)
    with pytest.raises(ValueError, match=message):
        FSDP2Trainer(model, TrainerArgs(lr=1e-2), **option)


@pytest.mark.usefixtures("whole_logits")
def test_step_matches_hf_and_full_weights_save_a_transformers_folder(tiny_model, tmp_path):
    ref, fsdp = _worker(tiny_model, "hf"), _worker(tiny_model, "fsdp2")
    before = _weights(ref)
    m_ref, m_fsdp = ref.train_step(_batch(ref), ARGS), fsdp.train_step(_batch(fsdp), ARGS)
    assert m_fsdp["grad_norm"] == pytest.approx(m_ref["grad_norm"], rel=1e-5)
    assert m_fsdp["pg_loss"] == pytest.approx(m_ref["pg_loss"], rel=1e-6)
    assert m_fsdp["lr"] == m_ref["lr"]
    trained, expected = _weights(fsdp), _weights(ref)
    assert trained.keys() == expected.keys()
    for name, tensor in trained.items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=1e-6, msg=name)
    assert not torch.equal(trained["model.norm.weight"], before["model.norm.weight"])

    with fsdp._full_weights() as copy:  # tied weights stay one tensor (sent once)
        assert copy.lm_head.weight is copy.model.embed_tokens.weight
    fsdp.save_pretrained(str(tmp_path))  # the gathered copy's save_pretrained
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path))
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight  # still tied
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, trained[name]), name
    plain = ActorTrainWorker(
        TrainedModelArgs(str(tmp_path), trainer=TrainerArgs(lr=1e-2), seed=0)
    )  # the folder as a policy
    torch.testing.assert_close(
        plain.compute_logprobs(_batch(plain)), fsdp.compute_logprobs(_batch(fsdp)), rtol=0, atol=0
    )


@pytest.mark.usefixtures("whole_logits")
def test_lora_trains_only_the_adapters_as_hf_lora_does(tiny_model, tmp_path) -> None:
    ref, fsdp = _worker(tiny_model, "hf", LORA), _worker(tiny_model, "fsdp2", LORA)
    before = _weights(fsdp)
    assert fsdp.trainable_parameters() == ref.trainable_parameters()
    optimised = fsdp.trainer.optimizer.param_groups[0]["params"]
    assert len(optimised) == 4 * 2 * 2  # q, k, v, o x (A, B) x 2 layers: nothing else
    m_ref, m_fsdp = ref.train_step(_batch(ref), ARGS), fsdp.train_step(_batch(fsdp), ARGS)
    assert m_fsdp["grad_norm"] == pytest.approx(m_ref["grad_norm"], rel=1e-5)
    trained, expected = _weights(fsdp), _weights(ref)
    for name, tensor in trained.items():
        if ".lora_" in name:  # B starts at 0, so only B moves in the first step
            assert torch.equal(tensor, before[name]) == (".lora_A." in name), name
            torch.testing.assert_close(tensor, expected[name], rtol=0, atol=1e-6, msg=name)
        else:  # the frozen base is the loaded model, bit for bit
            assert torch.equal(tensor, before[name]), name
    # the reference policy is the base: adapters off gives the untrained log-probs
    base = ActorTrainWorker(TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), seed=0))
    torch.testing.assert_close(
        fsdp.compute_ref_logprobs(_batch(fsdp)), base.compute_logprobs(_batch(base))
    )
    # the checkpoint: merged folder + adapter, and fsdp2's own shards of the adapters' states
    fsdp.save_pretrained(str(tmp_path))
    fsdp.save_state(str(tmp_path))
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    resumed = _worker(tiny_model, "fsdp2", LORA)
    resumed.load_state(str(tmp_path))
    again = _weights(resumed)
    assert all(torch.equal(again[name], trained[name]) for name in trained)


def test_a_fresh_trainer_resumes_the_checkpoint_bit_for_bit(tiny_model, tmp_path) -> None:
    first = _worker(tiny_model, "fsdp2")
    first.train_step(_batch(first), ARGS)
    first.save_pretrained(str(tmp_path))
    first.save_state(str(tmp_path))
    assert (tmp_path / CHECKPOINT_DIR / ".metadata").is_file()
    assert not (tmp_path / f".{CHECKPOINT_DIR}.tmp").exists()  # written, then renamed
    m_on = first.train_step(_batch(first), ARGS)
    uninterrupted = _weights(first)
    del first  # only the checkpoint survives

    fresh = _worker(tiny_model, "fsdp2")
    fresh.load_state(str(tmp_path))
    m_resumed = fresh.train_step(_batch(fresh), ARGS)
    assert m_resumed == m_on  # same loss, same norm, same scheduled lr
    resumed = _weights(fresh)
    assert all(torch.equal(resumed[name], uninterrupted[name]) for name in uninterrupted)


def test_an_hf_checkpoint_is_not_resumed_by_fsdp2(tiny_model, tmp_path) -> None:
    hf = _worker(tiny_model, "hf")
    hf.save_pretrained(str(tmp_path))
    hf.save_state(str(tmp_path))
    with pytest.raises(ValueError, match="written by the hf strategy; resume it with"):
        _worker(tiny_model, "fsdp2").load_state(str(tmp_path))
