"""A token budget per micro-batch splits each rank's rows by their lengths, so data-parallel
ranks may run different numbers of forwards; where a forward runs collectives (DeepSpeed's
ZeRO-3 gathers), a rank with fewer forwards leaves the others waiting forever. The update
and the log-prob forwards follow one rule (`data_parallel.token_budget`)."""

from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.distributed.data_parallel import token_budget
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs


def test_no_token_budget_where_ranks_run_collectives_per_forward() -> None:
    assert token_budget("deepspeed", world_size=2, max_tokens=64) is None
    assert token_budget("megatron", world_size=4, max_tokens=64) is None
    assert token_budget("deepspeed", world_size=1, max_tokens=64) == 64
    assert token_budget("hf", world_size=2, max_tokens=64) == 64
    assert token_budget("hf", world_size=1, max_tokens=None) is None


def test_zero3_ranks_compute_old_logprobs_in_row_count_micro_batches(tiny_model) -> None:
    """A rank of a 2-rank DeepSpeed group: its old log-probs (and LoRA's reference ones) run
    `micro_batch_size` rows per forward whatever their lengths, as every other rank does."""
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=0.0), num_threads=1)
    )
    forwards: list[int] = []
    embeddings = worker.model.get_input_embeddings()  # one call per forward
    embeddings.register_forward_hook(lambda m, inp, out: forwards.append(1))
    prompts = [[1, 2]] * 4
    responses = [[3] * n for n in (1, 2, 6, 8)]
    batch = Batch(rollout_tensors(prompts, responses, pad_id=0))

    def count(max_tokens: int) -> int:
        forwards.clear()
        worker.compute_logprobs(batch, micro_batch_size=4, max_tokens=max_tokens)
        return len(forwards)

    assert count(max_tokens=12) > 1  # one rank: the budget splits long rows apart
    worker.strategy, worker.world_size = "deepspeed", 2
    assert count(max_tokens=12) == 1  # the 4 rows in one forward, as on every rank
    torch.testing.assert_close(
        worker.compute_logprobs(batch, micro_batch_size=4, max_tokens=12),
        worker.compute_logprobs(batch, micro_batch_size=1),
    )
