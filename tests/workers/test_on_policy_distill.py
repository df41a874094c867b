"""On-policy distillation with the real workers (no Ray) on tiny-random: the student samples
answers with its current weights, the teacher scores every answer token, and the student's
step is the reverse KL there, checked against a plain forward of each sample on its own."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.packing import response_sample, sequence_batch
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.sampling import SamplingParams

QUESTIONS = ["1 + 2 =", "What is 3 + 4 + 5?", "7 - 1 ="]
PARAMS = SamplingParams(n=1, max_new_tokens=6, temperature=1.0, seed=7)


@pytest.fixture(scope="module")
def prompts(tiny_model) -> list[list[int]]:
    tokenizer = load_tokenizer(tiny_model)
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        )
        for q in QUESTIONS
    ]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


@pytest.fixture(scope="module")
def student_path(tiny_model, tmp_path_factory):
    from rollcli.models.student import build_student

    return build_student(tiny_model, 1, tmp_path_factory.mktemp("student") / "student")


def _on_policy_batch(student, teacher, prompts, pad_id):  # noqa: ANN001
    """What the pipeline's on-policy step builds: the student's samples, packed, with the
    teacher's full logits at every answer token."""
    gens = sorted(student.generate(prompts, PARAMS), key=lambda g: g["prompt_index"])
    samples = [response_sample(p, g["token_ids"]) for p, g in zip(prompts, gens, strict=True)]
    batch = sequence_batch(samples, pad_id, 128, packing=True)
    batch.set("teacher", teacher.teacher_logits(batch, micro_batch_size=2, top_k=0))
    return gens, samples, batch


def _reference_loss(student_path, teacher_path, prompts, samples):  # noqa: ANN001
    """The mean over answer tokens of `sum_v q(v) (log q(v) - log p(v))`, each sample run
    alone through plain transformers models, and the gradient norm of that loss."""
    from transformers import AutoModelForCausalLM

    student = AutoModelForCausalLM.from_pretrained(student_path, dtype=torch.float32)
    teacher = AutoModelForCausalLM.from_pretrained(teacher_path, dtype=torch.float32)
    terms = []
    for prompt, (ids, _) in zip(prompts, samples, strict=True):
        x = torch.tensor([ids])
        at = slice(len(prompt) - 1, len(ids) - 1)  # the positions predicting answer tokens
        log_q = torch.log_softmax(student(x).logits[0, at].float(), -1)
        with torch.no_grad():
            log_p = torch.log_softmax(teacher(x).logits[0, at].float(), -1)
        terms.append((log_q.exp() * (log_q - log_p)).sum(-1))
    loss = torch.cat(terms).mean()
    loss.backward()
    grads = [p.grad.flatten() for p in student.parameters() if p.grad is not None]
    return loss.item(), torch.cat(grads).norm().item()


def test_on_policy_step_is_the_reverse_kl_on_the_students_samples(
    tiny_model, student_path, prompts
) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.distill import DistillArgs, StudentWorker, TeacherArgs, TeacherWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    student = StudentWorker(
        TrainedModelArgs(str(student_path), trainer=TrainerArgs(lr=1e-3), num_threads=1)
    )
    teacher = TeacherWorker(TeacherArgs(str(tiny_model)))
    pad_id = student.tokenizer.pad_token_id
    gens, samples, batch = _on_policy_batch(student, teacher, prompts, pad_id)
    n_answer = sum(len(g["token_ids"]) for g in gens)
    assert batch.meta["targets"] == n_answer  # prompt and padding positions are not targets
    assert len(batch) < len(samples)  # packed: several samples share a row

    want_loss, want_grad_norm = _reference_loss(student_path, tiny_model, prompts, samples)
    out = student.distill_step(batch, DistillArgs(loss="reverse_kl", micro_batch_size=1))
    assert out["distill_loss"] == pytest.approx(want_loss, rel=1e-4)
    assert out["loss"] == pytest.approx(want_loss, rel=1e-4)  # sft_weight 0: nothing else
    assert out["grad_norm"] == pytest.approx(want_grad_norm, rel=1e-3)


def test_the_student_samples_with_its_current_weights(
    tiny_model, student_path, prompts, tmp_path
) -> None:
    from transformers import AutoModelForCausalLM

    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.distill import DistillArgs, StudentWorker, TeacherArgs, TeacherWorker
    from rollcli.workers.generation import generate_texts
    from rollcli.workers.trained_model import TrainedModelArgs

    student = StudentWorker(
        TrainedModelArgs(str(student_path), trainer=TrainerArgs(lr=1e-2), num_threads=1)
    )
    teacher = TeacherWorker(TeacherArgs(str(tiny_model)))
    pad_id = student.tokenizer.pad_token_id
    before, _, batch = _on_policy_batch(student, teacher, prompts, pad_id)
    args = DistillArgs(loss="reverse_kl", micro_batch_size=4)
    for _ in range(3):  # a large lr, so that the sampled tokens change
        student.distill_step(batch, args)
    # the same prompts and seed, after the updates: the student now samples from new weights
    after = student.generate(prompts, PARAMS)
    student.save_pretrained(str(tmp_path / "updated"))
    updated = AutoModelForCausalLM.from_pretrained(tmp_path / "updated", dtype=torch.float32)
    tokenizer = load_tokenizer(tmp_path / "updated")
    assert after == generate_texts(updated, tokenizer, prompts, PARAMS)  # its current weights
    assert [g["token_ids"] for g in after] != [g["token_ids"] for g in before]
    assert after != teacher.generate(prompts, PARAMS)  # not the teacher's samples


def test_a_row_must_hold_the_longest_prompt_and_a_full_answer() -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.pipelines.distill import _check_room

    _check_room([[1] * 50, [1] * 60], max_new_tokens=32, max_tokens=92)
    with pytest.raises(ConfigError, match="raise distill.max_tokens to at least 93") as err:
        _check_room([[1] * 50, [1] * 61], max_new_tokens=32, max_tokens=92)
    assert "\n" not in str(err.value)
