"""The TRL side of `bench/grpo_step.py`: a few GRPO steps of TRL's `GRPOTrainer`.

Runs in the bench environment (`make bench-env`: `.venv-bench/`, with TRL), never in roll's
own. Of roll it loads only the reward file (`rollcli/rewards/math_rule.py`, whose own
imports of `rollcli` resolve to this tree through the `PYTHONPATH` `bench/grpo_step.py` sets;
roll is not installed there). `bench/grpo_step.py` starts it as

    .venv-bench/bin/python bench/grpo_trl_worker.py SETTINGS.json

where SETTINGS.json holds the model folder, the prompts file (jsonl of `messages` and
`answer`, the same prompts roll trains on), the hyper-parameters taken from roll's resolved
recipe, and `out`: a jsonl file that gets one line per optimizer step (`step`, `step_s`,
TRL's logged `completions/mean_length` and `reward`).

The reward is roll's own math reward (`rollcli/rewards/math_rule.py`, math-verify correctness
plus the format component), loaded from its file so the bench environment needs no roll
install.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

REPO = Path(__file__).resolve().parents[1]


def load_math_reward():
    """roll's `math_reward(response, answer, format_weight=...)`, loaded from its file."""
    spec = importlib.util.spec_from_file_location(
        "roll_math_rule", REPO / "rollcli" / "rewards" / "math_rule.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.math_reward


def make_reward_fn(format_weight: float):
    math_reward = load_math_reward()

    def math_correctness(completions, answer, **_) -> list[float]:
        scores = []
        for completion, gold in zip(completions, answer, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            try:
                scores.append(math_reward(text, gold, format_weight=format_weight)["score"])
            except Exception:  # a crash in one sample's reward scores it 0, as in roll
                scores.append(0.0)
        return scores

    return math_correctness


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (generation, reward, forward/backward, update),
    written with the step's logged completion length and reward (`on_log` follows
    `on_step_end` in the Trainer, and `logging_steps=1` logs every step)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.last = 0.0
        self.pending: dict | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.pending = {"step": state.global_step, "step_s": now - self.last}
        self.last = now

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.pending is None:
            return
        logs = logs or {}
        self.pending["completion_mean_length"] = logs.get("completions/mean_length")
        self.pending["reward"] = logs.get("reward")
        with self.out.open("a") as f:
            f.write(json.dumps(self.pending) + "\n")
        self.pending = None


def main() -> None:
    settings = json.loads(Path(sys.argv[1]).read_text())
    torch.manual_seed(settings["seed"])
    rows = [json.loads(line) for line in Path(settings["prompts"]).read_text().splitlines()]
    dataset = Dataset.from_list([{"prompt": r["messages"], "answer": r["answer"]} for r in rows])
    samples = settings["samples_per_step"]
    micro = settings["micro_batch_size"]
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"),
        use_cpu=True,
        bf16=settings.get("bf16", False),  # autocast over fp32 weights (--trl-bf16)
        model_init_kwargs={"dtype": torch.float32},
        seed=settings["seed"],
        max_steps=settings["steps"],
        learning_rate=settings["lr"],
        lr_scheduler_type="constant",  # as grpo_step pins roll's (no warm-up, no decay)
        weight_decay=settings["weight_decay"],
        max_grad_norm=settings["grad_clip"],
        num_generations=settings["group_size"],
        per_device_train_batch_size=micro,  # completions per forward/backward, as roll's micro batch
        gradient_accumulation_steps=samples // micro,  # one optimizer step per 64 samples
        max_completion_length=settings["max_new_tokens"],
        temperature=settings["temperature"],
        top_p=1.0,
        top_k=0,
        beta=settings["kl_coef"],  # k3 KL to a reference model in the loss, as roll's grpo
        epsilon=settings["clip"],
        loss_type="grpo",  # mean over each sequence's tokens, then over sequences, as roll's
        gradient_checkpointing=False,  # TRL's default is on; roll's is off
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_pin_memory=False,
    )
    timer = StepTimer(Path(settings["out"]))
    trainer = GRPOTrainer(
        model=settings["model"],
        reward_funcs=make_reward_fn(settings["format_weight"]),
        args=config,
        train_dataset=dataset,
        callbacks=[timer],
    )
    trainer.train()


if __name__ == "__main__":
    main()
