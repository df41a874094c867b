"""The sft, dpo and distill workers as plain classes (no Ray) on tiny-random."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.batch import Batch
from rollcli.data.chat import tokenize_chat
from rollcli.data.packing import sequence_batch
from rollcli.data.pairs import pair_batch, pair_from_row, tokenize_pair
from rollcli.strategies.hf_model import load_tokenizer

CHATS = [
    ({"role": "user", "content": f"{a} + {b} ="}, {"role": "assistant", "content": f"{a + b}"})
    for a, b in [(1, 2), (3, 4), (5, 1), (2, 2), (7, 1)]
]


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return load_tokenizer(tiny_model)


@pytest.fixture(scope="module")
def seq_batch(tokenizer) -> Batch:
    samples = [tokenize_chat(tokenizer, c, 512)[:2] for c in CHATS]
    return sequence_batch(samples, tokenizer.pad_token_id, 128, packing=True)


def test_sft_step_reports_the_exact_token_mean_and_lowers_it(tiny_model, seq_batch) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.sft_train import SFTTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    worker = SFTTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    before = worker.eval_loss(seq_batch, micro_batch_size=1)
    out = worker.sft_step(seq_batch, micro_batch_size=1)
    assert out["loss"] == pytest.approx(before["loss"], rel=1e-5)  # same loss, any micro-batching
    for _ in range(3):
        worker.sft_step(seq_batch, micro_batch_size=2)
    assert worker.eval_loss(seq_batch)["loss"] < before["loss"] - 0.5


def test_sft_step_splits_by_tokens_with_the_same_update(tiny_model, seq_batch) -> None:
    """`micro_batch_tokens` bounds a forward's padded tokens; the step is the same token
    mean (the same loss and weights) as with whole-batch micro-batches."""
    from rollcli.data.packing import sequence_micro_batches
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.sft_train import SFTTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    width = int(seq_batch["length"].max())
    assert len(seq_batch) >= 2 and len(sequence_micro_batches(seq_batch, 8, width)) >= 2
    whole = SFTTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    split = SFTTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    a = whole.sft_step(seq_batch, micro_batch_size=8)
    b = split.sft_step(seq_batch, micro_batch_size=8, micro_batch_tokens=width)
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)
    for p, q in zip(whole.model.parameters(), split.model.parameters(), strict=True):
        # Adam moves each weight by ~lr = 1e-2; a near-zero gradient's step is noise-sized
        torch.testing.assert_close(p, q, rtol=0, atol=1e-4)
    assert split.eval_loss(seq_batch, 8, width)["loss"] == pytest.approx(
        whole.eval_loss(seq_batch, 8)["loss"], rel=1e-5
    )


def test_sft_step_runs_one_forward_per_token_budgeted_micro_batch(tiny_model, seq_batch) -> None:
    """The step honours `micro_batch_tokens`: it runs exactly the forwards of the split
    `sequence_micro_batches` makes (one without a budget), each within the budget."""
    from rollcli.data.packing import sequence_micro_batches
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.sft_train import SFTTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    width = int(seq_batch["length"].max())
    worker = SFTTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    shapes: list[tuple[int, ...]] = []
    decoder = worker.model.get_decoder()
    decoder.register_forward_hook(
        lambda _m, _a, kw, _out: shapes.append(kw["input_ids"].shape), with_kwargs=True
    )
    worker.sft_step(seq_batch, micro_batch_size=8)
    assert len(shapes) == 1
    shapes.clear()
    worker.sft_step(seq_batch, micro_batch_size=8, micro_batch_tokens=width)
    assert len(shapes) == len(sequence_micro_batches(seq_batch, 8, width)) >= 2
    assert all(rows * cols <= width for rows, cols in shapes)


def test_sft_worker_answers_prompts(tiny_model, tokenizer) -> None:
    from rollcli.strategies.sampling import SamplingParams
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.sft_train import SFTTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    worker = SFTTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    out = worker.generate([[1, 2, 3]], SamplingParams(max_new_tokens=4, temperature=0.0))
    assert len(out) == 1 and 0 < len(out[0]["token_ids"]) <= 4
    assert worker.model.training  # generation leaves the training mode as it was


def test_dpo_steps_open_a_margin_for_the_chosen_responses(tiny_model, tokenizer) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.dpo_train import DPOArgs, DPOTrainWorker
    from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    rows = [
        {"prompt": "2+3?", "chosen": "2 + 3 = 5", "rejected": "2 + 3 = 6"},
        {"prompt": "Capital of France?", "chosen": "Paris", "rejected": "Rome, I think"},
    ]
    tokenized = [tokenize_pair(tokenizer, pair_from_row(r, "x"), 256, 32) for r in rows]
    batch = pair_batch(tokenized, tokenizer.pad_token_id)
    batch.set(
        "ref_logprobs", ReferenceWorker(ReferenceArgs(str(tiny_model))).compute_logprobs(batch)
    )
    worker = DPOTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    args = DPOArgs(beta=0.5, micro_batch_size=1)
    first = worker.dpo_step(batch, args)
    assert first["loss"] == pytest.approx(0.693147, abs=1e-4)  # policy == reference
    assert first["rewards/margin"] == pytest.approx(0.0, abs=1e-5)
    for _ in range(3):
        last = worker.dpo_step(batch, args)
    assert last["rewards/margin"] > 0.1 and last["rewards/accuracy"] == 1.0
    assert last["loss"] < 0.69


def test_dpo_metrics_are_row_means_however_the_pairs_are_split(tiny_model, tokenizer) -> None:
    """Three pairs split 2 + 1 by a token budget: the metrics are the batch's pair means (as
    with one micro-batch), not the mean of the two micro-batches' means."""
    from rollcli.data.pairs import pair_micro_batches
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.dpo_train import DPOArgs, DPOTrainWorker
    from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    rows = [
        {"prompt": "2+3?", "chosen": "5", "rejected": "6"},
        {"prompt": "2+2?", "chosen": "4", "rejected": "22"},
        {"prompt": "Capital of France? Say it in a sentence.", "chosen": "It is Paris.",
         "rejected": "I think it is Rome, the capital of Italy."},
    ]  # fmt: skip
    tokenized = [tokenize_pair(tokenizer, pair_from_row(r, "x"), 256, 32) for r in rows]
    batch = pair_batch(tokenized, tokenizer.pad_token_id)
    # a budget that holds the two short pairs together and the long one alone
    short = int(batch["attention_mask"].sum(dim=1)[:4].max())
    budget = 4 * short
    assert [len(m) for _, m in pair_micro_batches(batch, 8, budget)] in ([4, 2], [2, 4])
    ref = ReferenceWorker(ReferenceArgs(str(tiny_model))).compute_logprobs(batch)
    batch.set("ref_logprobs", ref + torch.linspace(-0.3, 0.3, ref.shape[1]))  # margins differ
    results = []
    for tokens in (None, budget):
        worker = DPOTrainWorker(
            TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2), num_threads=1)
        )
        results.append(worker.dpo_step(batch, DPOArgs(beta=0.5, micro_batch_size=8,
                                                      micro_batch_tokens=tokens)))  # fmt: skip
    whole, split = results
    for key in ("rewards/margin", "rewards/chosen", "logps/chosen", "rewards/accuracy"):
        assert split[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-6), key


def test_student_is_built_from_evenly_spaced_teacher_layers(tiny_model, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    from rollcli.models.student import build_student

    path = build_student(tiny_model, 1, tmp_path / "student")
    student = AutoModelForCausalLM.from_pretrained(path)
    teacher = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert student.config.num_hidden_layers == 1
    t, s = teacher.state_dict(), student.state_dict()
    assert torch.equal(
        s["model.layers.0.mlp.up_proj.weight"], t["model.layers.0.mlp.up_proj.weight"]
    )
    assert torch.equal(s["model.embed_tokens.weight"], t["model.embed_tokens.weight"])
    assert build_student(tiny_model, 1, tmp_path / "student") == path  # kept when present
    with pytest.raises(ValueError, match="needs 1 to 1"):
        build_student(tiny_model, 2, tmp_path / "other")


@pytest.mark.parametrize("top_k", [0, 16])
def test_distillation_lowers_the_students_kl_to_the_teacher(
    tiny_model, tmp_path, seq_batch, top_k
) -> None:
    from rollcli.models.student import build_student
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.distill import DistillArgs, StudentWorker, TeacherArgs, TeacherWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    student_path = build_student(tiny_model, 1, tmp_path / "student")
    teacher = TeacherWorker(TeacherArgs(str(tiny_model)))
    student = StudentWorker(
        TrainedModelArgs(str(student_path), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    full = teacher.teacher_logits(seq_batch, micro_batch_size=1, top_k=0)
    targets = [int(n) for n in seq_batch["loss_mask"][:, 1:].sum(dim=1)]
    assert [r["logits"].shape for r in full] == [(n, 49152) for n in targets]
    val = Batch(dict(seq_batch.tensors), {"teacher": full}, seq_batch.meta)
    before = student.eval_distill(val)
    train = Batch(
        dict(seq_batch.tensors),
        {"teacher": teacher.teacher_logits(seq_batch, micro_batch_size=2, top_k=top_k)},
        seq_batch.meta,
    )
    if top_k:
        assert train["teacher"][0]["ids"].shape == (targets[0], top_k)
    mixed = student.distill_step(train, DistillArgs(sft_weight=0.1, micro_batch_size=1))
    assert mixed["loss"] == pytest.approx(0.9 * mixed["distill_loss"] + 0.1 * mixed["nll"])
    pure = DistillArgs(micro_batch_size=2)
    first = student.distill_step(train, pure)["distill_loss"]
    for _ in range(3):
        last = student.distill_step(train, pure)["distill_loss"]
    assert last < first  # the transferred divergence (top-k or full) goes down
    if not top_k:  # and with the full distribution, so does the held-out KL
        assert student.eval_distill(val)["kl"] < before["kl"]
