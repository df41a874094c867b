"""Workers are plain classes: built and exercised here without Ray."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM
from weight_sync_pair import send_weights

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import pad_left, rollout_tensors
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9]]


def test_greedy_generation_equals_transformers_generate(tiny_model) -> None:
    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1))
    out = worker.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=6, temperature=0.0))
    assert [o["prompt_index"] for o in out] == [0, 0, 1, 1, 2, 2]
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model)).eval()
    ids, mask = pad_left(PROMPTS, worker.tokenizer.pad_token_id)
    ref = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=6,
        do_sample=False,
        pad_token_id=worker.tokenizer.pad_token_id,
        eos_token_id=worker.engine.eos and sorted(worker.engine.eos),
    )
    for i in range(len(PROMPTS)):
        expected = ref[i, ids.shape[1] :].tolist()
        for o in out[2 * i : 2 * i + 2]:
            assert o["token_ids"] == expected[: len(o["token_ids"])]
            assert len(o["token_ids"]) == 6 or o["finished"]


def test_sampling_is_seeded(tiny_model) -> None:
    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1))
    params = SamplingParams(n=3, max_new_tokens=5, temperature=1.0, seed=11)
    a = [o["token_ids"] for o in worker.generate(PROMPTS, params)]
    b = [o["token_ids"] for o in worker.generate(PROMPTS, params)]
    assert a == b
    assert len({tuple(x) for x in a}) > 1


def _batch(worker: ActorTrainWorker) -> Batch:
    tensors = rollout_tensors(
        PROMPTS, [[10, 11, 12], [13], [14, 15]], worker.tokenizer.pad_token_id
    )
    return Batch(tensors)


def test_logprobs_match_a_direct_forward_pass(tiny_model) -> None:
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    batch = _batch(worker)
    got = worker.compute_logprobs(batch, micro_batch_size=2)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model)).eval()
    # reference computation: full logits, log-softmax, pick the response tokens
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
    ).logits
    width = int(batch["prompt_width"][0])
    expected = torch.log_softmax(logits[:, width - 1 : -1], dim=-1).gather(
        -1, batch["input_ids"][:, width:, None]
    )[..., 0]
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(got[mask], expected[mask], rtol=1e-4, atol=1e-4)


def test_a_train_step_raises_the_logprob_of_positive_advantage_samples(tiny_model) -> None:
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    batch = _batch(worker)
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3, [1.0] * 3]) * batch["response_mask"]
    batch.set("advantages", adv)
    before = worker.compute_logprobs(batch)
    metrics = worker.train_step(batch, PolicyUpdateArgs(micro_batch_size=2))
    after = worker.compute_logprobs(batch)
    m = batch["response_mask"]
    assert metrics["grad_norm"] > 0 and "entropy" in metrics and "pg_loss" in metrics
    assert ((after - before) * m)[0].sum() > 0 and ((after - before) * m)[2].sum() > 0
    assert ((after - before) * m)[1].sum() < 0


def test_weight_sync_makes_the_engine_equal_to_the_trainer(tiny_model) -> None:
    train = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    infer = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1))
    with torch.no_grad():
        for p in train.model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    send_weights(train.model, infer.model)
    for (name, a), b in zip(
        train.model.state_dict().items(), infer.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    # and the engine's log-probs now match the trainer's forward
    batch = _batch(train)
    lp_train = train.compute_logprobs(batch)
    lp_infer, _ = response_logprobs(
        infer.model,
        {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids", "prompt_width")},
    )
    torch.testing.assert_close(lp_train, lp_infer)


def test_the_hf_engine_does_not_sleep(tiny_model) -> None:
    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1))
    assert worker.sleep() is False  # it keeps its model: nothing to free on a CPU
    worker.wake()
    out = worker.generate(PROMPTS, SamplingParams(max_new_tokens=2, temperature=0.0))
    assert [len(o["token_ids"]) for o in out] == [2, 2, 2] or all(o["finished"] for o in out)


def test_resume_refuses_a_checkpoint_missing_a_policy_tensor(tiny_model, tmp_path) -> None:
    """Policy weights load strictly: a tensor missing from model.safetensors is an error
    naming it (tied weights, absent by design, still load)."""
    from safetensors.torch import load_file, save_file

    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    worker.save_pretrained(str(tmp_path))
    worker.save_state(str(tmp_path))
    worker.load_state(str(tmp_path))  # the whole checkpoint (lm_head tied) loads
    path = tmp_path / "model.safetensors"
    tensors = load_file(str(path))
    del tensors["model.norm.weight"]
    save_file(tensors, str(path), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"missing tensors \['model.norm.weight'\]"):
        worker.load_state(str(tmp_path))


class _RunsCode:
    """A pickled object whose loading calls a function: what an unsafe load would run."""

    def __reduce__(self):  # noqa: ANN204
        return (print, ("code from the run folder ran",))


def test_resume_loads_optimizer_state_without_running_its_code(tiny_model, tmp_path) -> None:
    """actor_optim.pt is read with `weights_only=True`: a pickled object is refused."""
    from rollcli.runs.checkpoint import UnsafeCheckpointError

    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    worker.save_pretrained(str(tmp_path))
    torch.save({"optimizer": _RunsCode()}, tmp_path / "actor_optim.pt")
    with pytest.raises(UnsafeCheckpointError, match="actor_optim.pt holds objects other"):
        worker.load_state(str(tmp_path))


def test_resume_loads_a_checkpoint_saved_in_shards(tiny_model, tmp_path) -> None:
    """A Hugging Face folder in shards (`model-0000k-of-0000N.safetensors` and the index, as
    `save_pretrained` writes above `max_shard_size`) resumes with every weight, strictly."""
    from safetensors.torch import load_file, save_file

    saved = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    with torch.no_grad():  # weights that differ from the starting ones
        for p in saved.model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    size = sum(p.numel() * p.element_size() for p in saved.model.parameters())
    saved.model.save_pretrained(str(tmp_path), max_shard_size=size // 3)
    saved.save_state(str(tmp_path))
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and (tmp_path / "model.safetensors.index.json").exists()
    assert not (tmp_path / "model.safetensors").exists()

    resumed = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    resumed.load_state(str(tmp_path))
    expected = saved.model.state_dict()
    for name, tensor in resumed.model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name

    tensors = load_file(str(shards[-1]))
    name = sorted(tensors)[0]
    del tensors[name]
    save_file(tensors, str(shards[-1]), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=rf"missing tensors \['{name}'\]"):
        resumed.load_state(str(tmp_path))
