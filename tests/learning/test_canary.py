"""Learning canary: GRPO must teach a tiny random policy a trivial task, on every seed.

Every piece is the real RL step's (`pipelines/rl/pipeline.py`), run without Ray: the hf
engine samples (`ActorInferWorker.generate`, seeded by `step_sampling` as a run seeds it),
a plain reward function scores, `build_batch` lays the samples out as the prompt scheduler
does, the reference worker adds the k3 KL's log-probs, `add_advantages` runs the recipe's
estimator (GRPO), `ActorTrainWorker.train_step` runs the recipe's policy loss, and the
weights reach the engine through the workers' own weight sync (`broadcast_weights` →
`receive_weights`). The algorithm, the update arguments and the sampling temperature (0.7)
are those of `rlvr-math`, the default demo; only the size of the task differs (`TASK`).

The task: 4 prompts x 8 samples of 4 tokens; the reward is the share of the 4-token budget
filled with even token ids (stopping early never pays). Each seed starts from its own
random init of the tiny-random architecture, whose final norm gain is raised
(`HEAD_GAIN`). At the default init the logits' spread is 0.23 nats and the policy is
uniform over 49,152 tokens (10.75 nats at temperature 0.7): a sampled token is almost never
drawn again and GRPO learns nothing in the canary's budget (measured: lr 1e-3, 20 steps,
the rollout's mean reward ~0.5 at the first steps and at the last). With the gain the
spread is 2.3 nats, the start policy's response tokens have ~2 nats of entropy (the first
step's `entropy`: 1.9-2.2) and parity is a coin flip among the likely ones.

Success is measured before and after training on 16 samples of each train prompt and of 4
held-out prompts, with the same sampling seed both times (paired); the held-out rise shows
the policy learned the reward, not one sequence per train prompt.

Measured on the working code (10 steps, lr 1e-3), success before -> after, 16 samples per
prompt at temperature 0.7:
    seed   train         held-out         seed   train         held-out
    0      0.48 -> 1.00  0.46 -> 1.00     6      0.51 -> 1.00  0.39 -> 0.96
    1      0.50 -> 1.00  0.63 -> 0.99     7      0.63 -> 1.00  0.53 -> 1.00
    2      0.43 -> 1.00  0.66 -> 0.89     8      0.43 -> 1.00  0.48 -> 1.00
    3      0.55 -> 0.98  0.50 -> 0.77     9      0.56 -> 0.99  0.55 -> 1.00
    4      0.48 -> 1.00  0.64 -> 0.92     10     0.54 -> 1.00  0.60 -> 0.91
    5      0.42 -> 1.00  0.52 -> 0.96     11     0.57 -> 1.00  0.61 -> 0.91
The rollout's mean reward passes 0.9 by step 2-4 on every seed; the held-out success lags
(at 8 steps seed 3's was 0.50 -> 0.55), hence 10 steps. About 4 s a seed on 2 idle cores.

Shown to fail on seeds 0, 1 and 2 (`SEEDS`), each breakage made by hand in the library and
reverted, train success before -> after (held-out):
- policy loss fed `-advantages` (actor_train.py): 0.48 -> 0.00, 0.50 -> 0.00, 0.43 -> 0.00
  (held-out 0.46 -> 0.00, 0.63 -> 0.10, 0.66 -> 0.20);
- estimator's advantages replaced by zeros (add_advantages): no update at all, 0.48, 0.50
  and 0.43 unchanged (the rollout mean wanders 0.32-0.72);
- sampler drawing one uniform for all rows (`_sample`; each row's marginal is still right,
  but a group's 8 samples are identical, so GRPO's advantages are 0): 0.50, 0.50 and 0.62
  unchanged;
- sampler returning the token after the one drawn (off by one in the CDF): 0.50 -> 0.28,
  0.48 -> 0.44, 0.53 -> 0.46 (held-out -0.06, +0.04, +0.04);
- sampler at temperature 1/0.7 instead of 0.7 (TemperatureLogitsWarper): 0.49 -> 0.66,
  0.47 -> 0.57, 0.54 -> 0.77; it learns slowly (and is judged with that flatter sampler),
  caught by `TRAIN_FLOOR` only (held-out rose 0.15, 0.05, 0.14).
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from rollcli.config.loader import load_recipe
from rollcli.pipelines.rl.advantages import add_advantages, make_kl_controller
from rollcli.pipelines.rl.source import step_sampling
from rollcli.pipelines.rl.update_args import update_args
from rollcli.rollout.result import build_batch
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
from rollcli.workers.trained_model import TrainedModelArgs

SEEDS = (0, 1, 2)
STEPS = 10
LR = 1e-3  # rlvr-math's 1e-5 is for a pretrained 135M model; a random 2-layer one needs more
HEAD_GAIN = 10.0
NEW_TOKENS = 4
GROUP = 8
TASK = [
    "seed={seed}",
    f"train.lr={LR}",
    f"rollout.max_new_tokens={NEW_TOKENS}",
    f"rollout.group_size={GROUP}",
    f"rollout.batch_size={4 * GROUP}",
]
TRAIN_PROMPTS = ["2 + 2 =", "The sky is", "Once upon a time", "Name a colour:"]
HELD_OUT_PROMPTS = ["3 + 5 =", "The sea is", "My favourite food is", "Count to three:"]
EVAL_SAMPLES = 16  # per prompt, before and after training
# Thresholds from the measurements in the module docstring (12 seeds, 5 breakages):
TRAIN_FLOOR = 0.9  # train success after training: 0.98-1.00 working, at most 0.77 broken
TRAIN_RISE = 0.2  # and its rise: at least 0.37 working (it starts at 0.42-0.63)
HELD_OUT_RISE = 0.1  # the held-out success's rise: at least 0.23 working


def even_share(token_ids: list[int], budget: int) -> float:
    """The reward: the share of a `budget`-token response filled with even token ids.

    >>> even_share([4, 7, 10, 3], budget=4)
    0.5
    >>> even_share([4], budget=4)  # stopping early never pays
    0.25
    """
    return sum(t % 2 == 0 for t in token_ids) / budget


@dataclass
class Run:
    """One seed's measurements: success before and after training, and each step's
    rollout mean reward."""

    seed: int
    train_before: float = 0.0
    train_after: float = 0.0
    held_before: float = 0.0
    held_after: float = 0.0
    rollout: list[float] = field(default_factory=list)

    def __str__(self) -> str:
        steps = " ".join(f"{r:.2f}" for r in self.rollout)
        return (
            f"seed {self.seed}: train {self.train_before:.2f} -> {self.train_after:.2f}, "
            f"held-out {self.held_before:.2f} -> {self.held_after:.2f}; rollout [{steps}]"
        )


def random_policy(tiny: Path, out: Path, seed: int) -> Path:
    """A fresh random init of the tiny-random model (its folder, with its tokenizer) with
    the final norm's gain raised to `HEAD_GAIN` (see the module docstring)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    shutil.copytree(tiny, out, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny))
    with torch.no_grad():
        model.get_decoder().norm.weight.mul_(HEAD_GAIN)
    model.save_pretrained(out, safe_serialization=True)
    return out


def success(infer: ActorInferWorker, prompts: list[list[int]], params: SamplingParams) -> float:
    rows = infer.generate(prompts, params)
    return sum(even_share(r["token_ids"], NEW_TOKENS) for r in rows) / len(rows)


def learn(model: Path, seed: int, steps: int = STEPS) -> Run:
    """`steps` GRPO steps of the RL pipeline's step on the task, from `model`."""
    cfg, _ = load_recipe("rlvr-math", [o.format(seed=seed) for o in TASK])
    args = update_args(cfg)
    train = ActorTrainWorker(
        TrainedModelArgs(str(model), trainer=TrainerArgs(lr=cfg.train.lr), seed=seed)
    )
    infer = ActorInferWorker(ActorInferArgs(str(model), seed=seed))
    reference = ReferenceWorker(ReferenceArgs(str(model)))
    host, port = train.open_weight_sync(world_size=2)
    joined = threading.Thread(target=infer.init_weight_sync, args=(host, port, 1, 2))
    joined.start()
    train.connect_weight_sync()
    joined.join()
    kl_ctl = make_kl_controller(cfg.algorithm)
    pad = infer.tokenizer.pad_token_id

    def encode(texts: list[str]) -> list[list[int]]:
        return [infer.tokenizer(t)["input_ids"] for t in texts]

    prompts, held_out = encode(TRAIN_PROMPTS), encode(HELD_OUT_PROMPTS)
    judge = SamplingParams(
        n=EVAL_SAMPLES,
        max_new_tokens=NEW_TOKENS,
        temperature=cfg.rollout.temperature,
        seed=1_000_003 + seed,
    )
    run = Run(seed, success(infer, prompts, judge), held_before=success(infer, held_out, judge))
    for step in range(1, steps + 1):
        # 1. rollout: the engine samples, the reward scores
        rows = infer.generate(prompts, step_sampling(cfg.rollout, cfg.seed, step, n=GROUP))
        scores = [even_share(r["token_ids"], NEW_TOKENS) for r in rows]
        run.rollout.append(sum(scores) / len(scores))
        batch = build_batch(
            [prompts[r["prompt_index"]] for r in rows],
            [r["token_ids"] for r in rows],
            scores,
            [r["finished"] for r in rows],
            pad,
            {"behaviour_logprobs": [r["logprobs"] for r in rows]},
        )
        # 2. reference log-probs (on-policy: no old log-probs)
        batch.set("ref_logprobs", reference.compute_logprobs(batch, **args.forward_sizes()))
        # 3. advantages
        add_advantages(
            cfg.algorithm,
            batch,
            group_size=GROUP,
            max_new_tokens=NEW_TOKENS,
            kl_ctl=kl_ctl,
            running=None,
        )
        # 4. update, 5. sync
        train.train_step(batch, args)
        received = threading.Thread(target=infer.receive_weights)
        received.start()
        train.broadcast_weights()
        received.join()
    run.train_after = success(infer, prompts, judge)
    run.held_after = success(infer, held_out, judge)
    return run


@pytest.mark.parametrize("seed", SEEDS)
def test_grpo_learns_the_task_on_every_seed(tiny_model: Path, tmp_path: Path, seed: int) -> None:
    run = learn(random_policy(tiny_model, tmp_path / "policy", seed), seed)
    print(run)
    assert run.train_after >= TRAIN_FLOOR, f"did not learn: {run}"
    assert run.train_after >= run.train_before + TRAIN_RISE, f"did not learn: {run}"
    assert run.held_after >= run.held_before + HELD_OUT_RISE, f"did not generalise: {run}"
