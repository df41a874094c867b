"""The deepspeed strategy for real on CPU (gloo, torch AdamW): ZeRO-2 and ZeRO-3 steps of
tiny-random agree with the plain-torch trainer, and its checkpoints load back."""

from __future__ import annotations

import pytest
import torch

from rollcli.strategies.train_engines import TrainStrategy

pytest.importorskip("deepspeed")

from rollcli.algorithms.update_args import PolicyUpdateArgs  # noqa: E402
from rollcli.data.batch import Batch  # noqa: E402
from rollcli.data.padding import rollout_tensors  # noqa: E402
from rollcli.strategies.deepspeed_train import deepspeed_config  # noqa: E402
from rollcli.strategies.trainer import TrainerArgs  # noqa: E402
from rollcli.workers.actor_train import ActorTrainWorker  # noqa: E402
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4]]
RESPONSES = [[10, 11, 12], [13], [14, 15], [16, 17, 18]]


def _batch(worker: ActorTrainWorker) -> Batch:
    batch = Batch(rollout_tensors(PROMPTS, RESPONSES, worker.tokenizer.pad_token_id))
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3, [1.0] * 3, [-0.5] * 3]) * batch["response_mask"]
    batch.set("advantages", adv)
    return batch


def _worker(tiny_model, strategy: str, **options) -> ActorTrainWorker:
    return ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            trainer=TrainerArgs(lr=1e-2, grad_clip=1.0),
            num_threads=1,
            seed=0,
            strategy=TrainStrategy(strategy, **options),
        )
    )


def test_config_refuses_impossible_offload() -> None:
    with pytest.raises(ValueError, match="zero_stage 3"):
        deepspeed_config(zero_stage=2, grad_clip=1.0, offload_params=True)
    assert deepspeed_config(zero_stage=3, grad_clip=None)["gradient_clipping"] == 0.0


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_step_matches_plain_torch_and_checkpoint_round_trips(tiny_model, tmp_path, stage):
    ref = _worker(tiny_model, "hf")
    ds = _worker(tiny_model, "deepspeed", zero_stage=stage)
    args = PolicyUpdateArgs(micro_batch_size=2)
    m_ref = ref.train_step(_batch(ref), args)
    m_ds = ds.train_step(_batch(ds), args)
    # Same AdamW, same accumulation over two micro-batches, same clipping: same update.
    assert m_ds["grad_norm"] == pytest.approx(m_ref["grad_norm"], rel=1e-4)
    assert m_ds["pg_loss"] == pytest.approx(m_ref["pg_loss"], rel=1e-5)
    torch.testing.assert_close(
        ds.compute_logprobs(_batch(ds)), ref.compute_logprobs(_batch(ref)), rtol=1e-4, atol=1e-4
    )
    # Save (HF folder + deepspeed partitions), train on, then load: back to the saved point.
    ds.save_pretrained(str(tmp_path))
    ds.save_state(str(tmp_path))
    assert (tmp_path / "model.safetensors").is_file()
    assert (tmp_path / "deepspeed" / "state").is_dir()
    saved = ds.compute_logprobs(_batch(ds))
    ds.train_step(_batch(ds), args)
    assert not torch.allclose(ds.compute_logprobs(_batch(ds)), saved)
    ds.load_state(str(tmp_path))
    torch.testing.assert_close(ds.compute_logprobs(_batch(ds)), saved)
    # The HF folder holds the whole (gathered) weights: plain transformers loads them.
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path))
    with ds._full_weights() as model:
        for (name, a), b in zip(model.state_dict().items(), hf.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, msg=name)
