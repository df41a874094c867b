"""Every `algorithm:` key on the agentic pipeline: it changes the advantages or the update
as hand-computed, or the recipe is refused at load with one line naming it.

The batch is built from real episodes (the tiny-random tokenizer's chat turns, fixed
rewards) and goes through the pipeline's own advantage step (`agentic_step_advantages`,
rlvr's stage). Four episodes in two groups (groups share an env seed):

    A (group 0): 2 turns, rewards 0, 1 -> return 1, 4 model tokens (each reply + EOS)
    B (group 0): 1 turn,  reward 0      -> return 0, 2 model tokens
    C (group 1): 1 turn,  reward 3      -> return 3, 2 model tokens
    D (group 1): 1 turn,  reward 1      -> return 1, 2 model tokens, cut by the context limit

Each expected row below lists, per episode, the advantage of its model tokens in order.
The last test is a real `roll train agentic-frozenlake` run with `algorithm.name=rloo`.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import torch
from agentic_steps import agentic_step_advantages
from roll_subprocess import roll

from rollcli.algorithms.kl import AdaptiveKLController
from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.errors import ConfigError
from rollcli.config.loader import validate_recipe
from rollcli.pipelines.rl.advantages import make_kl_controller
from rollcli.pipelines.rl.episode_batch import (
    DRIVER_FIELDS,
    episodes_to_batch,
)
from rollcli.pipelines.rl.update_args import update_args
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits

RETURNS = [1.0, 0.0, 3.0, 1.0]
TOKENS = [4, 2, 2, 2]  # model tokens per episode
S2 = 1 / math.sqrt(2)  # a group of two, std-normalised: +-(d/2) / (d/sqrt(2)) = +-1/sqrt(2)
GRPO = [S2, -S2, S2, -S2]  # (grpo's eps 1e-6 is below the tolerance)


def _recipe(alg: dict):
    return validate_recipe({"name": "t", "pipeline": "agentic", "algorithm": alg}, "t")


def _episode(
    fmt: TurnFormat, group: int, replies: list[int], rewards: list[float], keys, cut=False
):
    ep = Episode(EpisodeSpec(0, group, 100 + group))
    ep.start({"observation": "o0", "state_key": keys[0]}, fmt, "o0")
    eos = fmt.tokenizer.eos_token_id
    for t, (token, reward) in enumerate(zip(replies, rewards, strict=True)):
        ep.add_reply({"token_ids": [token, eos], "text": f"r{t}", "finished": True})
        last = t == len(replies) - 1
        context = len(ep.context_ids()) + (2 if cut else 4096)  # cut: no room for a turn
        result = {"observation": f"o{t + 1}", "reward": reward, "terminated": last and not cut}
        result["state_key"] = keys[t + 1] if t + 1 < len(keys) else ""
        ep.observe(result, fmt, Limits(5, context, 8), f"o{t + 1}")
    return ep


@pytest.fixture(scope="module")
def fmt(tiny_model) -> TurnFormat:
    from rollcli.strategies.hf_model import load_tokenizer

    return TurnFormat(load_tokenizer(tiny_model), "RULES")


@pytest.fixture
def batch(fmt):
    episodes = [
        _episode(fmt, 0, [101, 102], [0.0, 1.0], ["s0", "s1"]),
        _episode(fmt, 0, [103], [0.0], ["s0"]),
        _episode(fmt, 1, [104], [3.0], ["t0"]),
        _episode(fmt, 1, [105], [1.0], ["t0"], cut=True),
    ]
    assert [e.episode_return for e in episodes] == RETURNS
    assert [e.end for e in episodes] == ["terminated"] * 3 + ["context"]
    b = episodes_to_batch(episodes, fmt.tokenizer.pad_token_id)
    assert b["response_mask"].sum(1).tolist() == TOKENS
    return b


def _advantages(batch, alg: dict, mode="starpo", kl_ctl=None, running=None, **gigpo):
    cfg = _recipe(alg).algorithm
    kl_ctl = kl_ctl or make_kl_controller(cfg)
    if cfg.norm_mode == "running" and running is None:
        running = RunningMeanStd()
    metrics = agentic_step_advantages(
        cfg,
        batch,
        group_size=2,
        mode=mode,
        max_new_tokens=8,
        kl_ctl=kl_ctl,
        running=running,
        **gigpo,
    )
    mask = batch["response_mask"].bool()
    adv = batch["advantages"]
    assert adv[~mask].abs().sum() == 0  # nothing on env tokens or padding
    return [adv[i][mask[i]].tolist() for i in range(len(batch))], metrics


def _close(got: list[list[float]], want: list[list[float]]) -> bool:
    assert len(got) == len(want)
    return all(g == pytest.approx(w, abs=1e-5) for g, w in zip(got, want, strict=True))


def _flat(per_episode: list[float]) -> list[list[float]]:
    """One value per episode, on every one of its model tokens."""
    return [[v] * n for v, n in zip(per_episode, TOKENS, strict=True)]


def _whiten(rows: list[list[float]]) -> list[list[float]]:
    """`masked_whiten` over every model token of the batch, by hand (unbiased variance)."""
    tokens = [x for row in rows for x in row]
    mean, var = statistics.fmean(tokens), statistics.variance(tokens)
    return [[(x - mean) / math.sqrt(var + 1e-8) for x in row] for row in rows]


def _reward_to_go(per_token: float, n: int) -> list[float]:
    """gamma = 1: token k of n carries n - k tokens' worth of a per-token reward."""
    return [per_token * (n - k) for k in range(n)]


def _batch_norm(xs: list[float], std: float) -> list[float]:
    return [(x - statistics.fmean(xs)) / std for x in xs]


# Rows: (key, algorithm section, agentic mode, expected advantages per episode).
SCORE_STD = statistics.stdev(RETURNS)  # unbiased, as grpo's and normalize_scores' std
SCORE_POP = math.sqrt(statistics.pvariance(RETURNS) + 1e-8)  # RunningMeanStd after one batch
GIGPO_NO_STD = [[1.0, 1.0, 0.5, 0.5], [-1.0, -1.0], [3.0, 3.0], [-3.0, -3.0]]
ADVANTAGE_ROWS = [
    ("advantage=grpo (default)", {}, "starpo", _flat(GRPO)),
    ("norm_std", {"norm_std": False}, "starpo", _flat([0.5, -0.5, 1.0, -1.0])),
    ("advantage=rloo", {"advantage": "rloo"}, "starpo", _flat([1.0, -1.0, 2.0, -2.0])),
    ("advantage=reinforce", {"advantage": "reinforce"}, "starpo", _flat(RETURNS)),
    (
        "gamma",
        {"advantage": "reinforce", "gamma": 0.5},  # discounted over model tokens only
        "starpo",
        [[0.125, 0.25, 0.5, 1.0], [0.0, 0.0], [1.5, 3.0], [0.5, 1.0]],
    ),
    ("reward_clip", {"advantage": "reinforce", "reward_clip": 2.0}, "starpo", _flat([1, 0, 2, 1])),
    ("norm_mode=group", {"advantage": "reinforce", "norm_mode": "group"}, "starpo", _flat(GRPO)),
    (
        "norm_mode=batch",
        {"advantage": "reinforce", "norm_mode": "batch"},
        "starpo",
        _flat(_batch_norm(RETURNS, SCORE_STD + 1e-6)),
    ),
    (
        "norm_mode=running",
        {"advantage": "reinforce", "norm_mode": "running"},
        "starpo",
        _flat(_batch_norm(RETURNS, SCORE_POP)),
    ),
    (
        "whiten_advantages",
        {"advantage": "reinforce", "whiten_advantages": True},
        "starpo",
        _whiten(_flat(RETURNS)),
    ),
    ("advantage=reinforce_pp", {"advantage": "reinforce_pp"}, "starpo", _whiten(_flat(RETURNS))),
    (
        "advantage=reinforce_pp_baseline",
        {"advantage": "reinforce_pp_baseline"},
        "starpo",
        _whiten(_flat([0.5, -0.5, 1.0, -1.0])),  # minus the group mean, then whitened
    ),
    ("advantage_clip", {"advantage_clip": 0.6}, "starpo", _flat([0.6, -0.6, 0.6, -0.6])),
    (
        "mask_truncated",  # D (cut by the context limit) leaves the loss, not C's baseline
        {"advantage": "rloo", "mask_truncated": True},
        "starpo",
        [[1.0] * 4, [-1.0] * 2, [2.0] * 2, []],
    ),
    # GiGPO, norm_std off, omega 2, step gamma 0.5. Step returns A [0.5, 1], B [0], C [3],
    # D [1]; anchors (0, s0): A0 0.5, B0 0 -> +-0.25; (1, t0): C 3, D 1 -> +-1; s1 alone 0.
    ("agentic.mode=gigpo", {"norm_std": False}, "gigpo", GIGPO_NO_STD),
    (
        "whiten_advantages with gigpo",  # the step term is added before whitening
        {"norm_std": False, "whiten_advantages": True},
        "gigpo",
        _whiten(GIGPO_NO_STD),
    ),
    (
        "advantage_clip with gigpo",  # and before clipping
        {"norm_std": False, "advantage_clip": 2.0},
        "gigpo",
        [[1.0, 1.0, 0.5, 0.5], [-1.0, -1.0], [2.0, 2.0], [-2.0, -2.0]],
    ),
]


@pytest.mark.parametrize(
    ("key", "alg", "mode", "expected"), ADVANTAGE_ROWS, ids=[r[0] for r in ADVANTAGE_ROWS]
)
def test_advantage_keys_act_on_agentic_episodes(batch, key, alg, mode, expected) -> None:
    gigpo = {"step_weight": 2.0, "step_gamma": 0.5} if mode == "gigpo" else {}
    got, _ = _advantages(batch, {"kl_coef": 0.0, **alg}, mode, **gigpo)
    assert _close(got, expected), (key, got)


def _with_logprobs(batch) -> None:
    """Sampling policy at log-prob 0, reference at -0.5: log r = -0.5 on every token."""
    batch.set("old_logprobs", torch.zeros_like(batch["response_mask"]))
    batch.set("ref_logprobs", torch.full_like(batch["response_mask"], -0.5))


K3 = math.exp(-0.5) - 1 + 0.5
KL_ROWS = [
    # (key, algorithm section, sequence advantages, per-token KL, coefficient)
    ("kl_in=reward, k1", {"kl_coef": 0.1, "kl_in": "reward", "kl_estimator": "k1"}, GRPO, 0.5, 0.1),
    (
        "kl_estimator=k2",
        {"kl_coef": 0.1, "kl_in": "reward", "kl_estimator": "k2"},
        GRPO,
        0.125,
        0.1,
    ),
    ("kl_estimator=k3", {"kl_coef": 0.1, "kl_in": "reward", "kl_estimator": "k3"}, GRPO, K3, 0.1),
    # the rloo preset: leave-one-out baseline, k1 KL in the reward with kl_coef 0.001
    ("name=rloo", {"name": "rloo"}, [1.0, -1.0, 2.0, -2.0], 0.5, 0.001),
]


@pytest.mark.parametrize(("key", "alg", "seq", "kl", "coef"), KL_ROWS, ids=[r[0] for r in KL_ROWS])
def test_kl_in_the_reward_is_applied_on_agentic_episodes(batch, key, alg, seq, kl, coef) -> None:
    """Each model token adds the reward-to-go of -coef * kl (rlvr's sequence-level rule)."""
    _with_logprobs(batch)
    got, metrics = _advantages(batch, alg)
    want = [[a + r for r in _reward_to_go(-coef * kl, n)] for a, n in zip(seq, TOKENS, strict=True)]
    assert _close(got, want), (key, got)
    assert metrics["actor/kl_reward"] == pytest.approx(kl)
    assert metrics["actor/kl_coef"] == pytest.approx(coef)
    assert update_args(_recipe(alg)).kl_loss_coef == 0.0  # not twice


def test_kl_in_the_loss_leaves_advantages_and_goes_to_the_update(batch) -> None:
    _with_logprobs(batch)
    alg = {"kl_coef": 0.1, "kl_in": "loss", "kl_estimator": "k2"}
    got, metrics = _advantages(batch, alg)
    assert _close(got, _flat(GRPO)) and "actor/kl_reward" not in metrics
    args = update_args(_recipe(alg))
    assert (args.kl_loss_coef, args.kl_estimator) == (0.1, "k2")
    assert _recipe(alg).reference_role == "reference"


def test_adaptive_kl_controller_moves_the_coefficient_between_steps(batch) -> None:
    """Ziegler et al.: e = clip(0.5 / 0.4 - 1, -0.2, 0.2) = 0.2 with 4 episodes, horizon 10:
    0.1 -> 0.1 * (1 + 0.2 * 4 / 10) = 0.108, which the next step's KL reward uses."""
    _with_logprobs(batch)
    alg = {"kl_coef": 0.1, "kl_in": "reward", "kl_estimator": "k1", "kl_controller": "adaptive"}
    alg |= {"kl_target": 0.4, "kl_horizon": 10.0}
    ctl = make_kl_controller(_recipe(alg).algorithm)
    assert isinstance(ctl, AdaptiveKLController)
    _advantages(batch, alg, kl_ctl=ctl)
    assert ctl.value == pytest.approx(0.108)
    got, metrics = _advantages(batch, alg, kl_ctl=ctl)
    assert metrics["actor/kl_coef"] == pytest.approx(0.108)
    assert got[1] == pytest.approx([-S2 - 0.108 * 0.5 * 2, -S2 - 0.108 * 0.5], abs=1e-5)


def test_running_norm_keeps_its_statistics_across_steps(batch, fmt) -> None:
    """norm_mode: running normalises step 2 by the statistics of steps 1 and 2 together."""
    running = RunningMeanStd()
    _advantages(batch, {"advantage": "reinforce", "norm_mode": "running"}, running=running)
    again = episodes_to_batch(
        [
            _episode(fmt, 0, [101], [5.0], ["s0"]),
            _episode(fmt, 0, [102], [5.0], ["s0"]),
        ],
        fmt.tokenizer.pad_token_id,
    )
    got, _ = _advantages(again, {"advantage": "reinforce", "norm_mode": "running"}, running=running)
    both = [*RETURNS, 5.0, 5.0]
    want = (5.0 - statistics.fmean(both)) / math.sqrt(statistics.pvariance(both) + 1e-8)
    assert got[0] == pytest.approx([want, want], abs=1e-5)


LOSS_KEYS = [
    # (algorithm key, value, the update argument that carries it)
    ("policy_loss", "gspo", "policy_loss"),
    ("clip_low", 0.1, "clip_low"),
    ("clip_high", 0.3, "clip_high"),
    ("dual_clip", 3.0, "dual_clip"),
    ("loss_agg", "token-mean", "loss_agg"),
    ("loss_norm_len", 64, "norm_len"),
    ("entropy_coef", 0.01, "entropy_coef"),
    ("ppo_epochs", 2, "epochs"),
]


@pytest.mark.parametrize(("key", "value", "arg"), LOSS_KEYS, ids=[k[0] for k in LOSS_KEYS])
def test_update_keys_reach_the_agentic_update(key, value, arg) -> None:
    """The agentic pipeline hands the shared actor worker these arguments, as rlvr does."""
    assert getattr(update_args(_recipe({key: value})), arg) == value


@pytest.mark.parametrize(
    ("loss_agg", "pg_loss"),
    [
        ("token-mean", -(4 * 0.5 - 2 * 0.5 + 2 * 1.0 - 2 * 1.0) / 10),  # over the 10 tokens
        ("seq-mean-token-mean", -(0.5 - 0.5 + 1.0 - 1.0) / 4),  # over the 4 episodes
    ],
)
def test_loss_agg_changes_the_agentic_loss(tiny_model, batch, loss_agg, pg_loss) -> None:
    """One real on-policy update (ratio 1): the pg loss is -agg(A), A = [.5, -.5, 1, -1]."""
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    alg = {"norm_std": False, "kl_coef": 0.0, "loss_agg": loss_agg}
    _advantages(batch, alg)
    for key in DRIVER_FIELDS:
        batch.fields.pop(key)
    args = update_args(_recipe(alg))
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-6), seed=0)
    )
    out = worker.train_step(batch, args)
    assert out["pg_loss"] == pytest.approx(pg_loss, abs=1e-5)


@pytest.mark.parametrize(
    ("lam", "want"),
    [
        (1.0, _flat([0.5, -0.5, 2.5, 0.5])),  # Monte-Carlo return - V on every model token
        # one-step TD errors: 0 inside an episode (V - V), the return - V on its last model
        # token; the env's turn between episode 0's replies is skipped, not a step of GAE
        (0.0, [[0.0, 0.0, 0.0, 0.5], [0.0, -0.5], [0.0, 2.5], [0.0, 0.5]]),
    ],
)
def test_gae_uses_the_critics_values_on_model_tokens(batch, lam, want) -> None:
    """`advantage: gae` (the critic's estimator) on an agentic batch with values 0.5 on
    every position: GAE by hand, gamma 1."""
    batch.set("values", torch.full(batch["response_mask"].shape, 0.5))
    got, _ = _advantages(batch, {"advantage": "gae", "lam": lam, "kl_coef": 0.0})
    assert _close(got, want)
    returns = batch["returns"][batch["response_mask"].bool()]
    assert returns.tolist()[-1] == pytest.approx(1.0)  # R = A + V on the last model token


REFUSED = [
    ({"lam": 0.9}, "algorithm.lam = 0.9 is GAE's lambda"),
    ({"value_clip": 0.2}, "value_clip needs a critic"),
    ({"dynamic_sampling": True}, "algorithm.dynamic_sampling: re-sampling prompts"),
    ({"name": "dapo"}, "algorithm.dynamic_sampling (set by algorithm.name = dapo)"),
    ({"max_resample_rounds": 5}, "algorithm.max_resample_rounds tunes dynamic sampling"),
    ({"max_resample_rounds": 5, "dynamic_sampling": True}, "algorithm.dynamic_sampling: re-"),
    ({"overlong_buffer": 0.2}, "algorithm.overlong_buffer: the overlong penalty shapes one"),
    ({"overlong_penalty": 0.5}, "algorithm.overlong_penalty = 0.5 applies within"),
    ({"kl_controller": "adaptive"}, "with kl_in: loss it would stay algorithm.kl_coef"),
    ({"kl_target": 1.0}, "algorithm.kl_target / kl_horizon tune kl_controller: adaptive"),
    ({"kl_horizon": 100.0}, "algorithm.kl_target / kl_horizon tune kl_controller: adaptive"),
]


@pytest.mark.parametrize(("alg", "line"), REFUSED, ids=[str(r[0]) for r in REFUSED])
def test_keys_that_cannot_apply_are_refused_at_load(alg, line) -> None:
    with pytest.raises(ConfigError) as err:
        _recipe(alg)
    message = str(err.value)
    assert message.startswith("t: ") and line in message and "\n" not in message


def test_a_crashed_episode_takes_its_group_out_of_the_batch(fmt) -> None:
    """The stage compares equal groups: a group with a crashed episode is left out whole."""
    ok = [_episode(fmt, 0, [101], [1.0], ["s"]), _episode(fmt, 0, [102], [0.0], ["s"])]
    crashed = _episode(fmt, 1, [103], [1.0], ["s"])
    crashed.error = "boom"
    batch = episodes_to_batch([*ok, crashed, _episode(fmt, 1, [104], [0.0], ["s"])], 0)
    assert batch["group"] == [0, 0]
    got, _ = _advantages(batch, {"advantage": "rloo", "kl_coef": 0.0})
    assert got == [[1.0, 1.0], [-1.0, -1.0]]


@pytest.mark.slow  # about 2 minutes: a reference worker besides the default tier's runs
def test_rloo_applies_its_kl_in_a_real_agentic_run(tmp_path: Path, tiny_model) -> None:
    """`roll train agentic-frozenlake algorithm.name=rloo` with the adaptive controller: the
    reference runs, its KL goes into the reward (logged by the advantage stage), the
    controller moves the coefficient between steps and the checkpoint keeps it. The
    entropy bonus moves the policy in step 1 even if every episode of a group scores the
    same."""
    result = roll(
        "train", "agentic-frozenlake", "--model", "tiny-random", "--steps", "2",
        "--runs-dir", str(tmp_path), "--run-id", "t", "--eval-every", "0",
        "algorithm.name=rloo", "algorithm.kl_coef=0.05", "algorithm.entropy_coef=0.1",
        "algorithm.kl_controller=adaptive", "algorithm.kl_target=0.01",
        "algorithm.kl_horizon=10",
        "agentic.group_size=2", "agentic.groups_per_step=2", "agentic.val_episodes=2",
        "agentic.max_turns=2", "rollout.max_new_tokens=4", "train.micro_batch_size=4",
        "train.lr=1e-3", "warmup=null", cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "t"
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][1:]
    assert [m["step"] for m in steps] == [1, 2]
    # step 1 samples from the reference's own weights: KL 0; after one update it is not
    kl1, kl2 = steps[0]["actor/kl_reward"], steps[1]["actor/kl_reward"]
    assert kl1 == pytest.approx(0.0, abs=1e-4) and abs(kl2) > 1e-4, steps
    # the worker's KL metric on the same tokens and weights (one micro-batch): the same KL
    assert steps[1]["actor/kl"] == pytest.approx(kl2, rel=1e-3, abs=1e-5)
    # adaptive: coef *= 1 + clip(kl / 0.01 - 1, -0.2, 0.2) * 4 episodes / 10
    coef1 = 0.05 * (1 - 0.2 * 0.4)
    coef2 = coef1 * (1 + min(max(kl2 / 0.01 - 1, -0.2), 0.2) * 0.4)
    assert steps[0]["actor/kl_coef"] == pytest.approx(0.05)
    assert steps[1]["actor/kl_coef"] == pytest.approx(coef1)
    state = json.loads((run / "checkpoints" / "step-2" / "trainer_state.json").read_text())
    assert state["kl_controller"]["value"] == pytest.approx(coef2)


def test_doctests() -> None:
    import doctest

    from rollcli.config import agentic_algorithm
    from rollcli.pipelines.rl import episode_batch as agentic_batch

    for module in (agentic_algorithm, agentic_batch):
        assert doctest.testmod(module).failed == 0, module.__name__
