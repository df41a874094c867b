"""Reward code as verl, TRL and OpenRLHF users have it, called the way their project calls
it (issue #81, item 1): reward files in each project's style (tests/other_projects.py) on
datasets in each project's layout, read by roll's data loading and scored by the reward
worker training uses. Expected scores are counted by hand from the twelve sums."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from other_projects import (
    OPENRLHF_REWARD,
    PLAIN_REWARD,
    TRL_REWARD,
    VERL_REWARD,
    sums,
    write_openrlhf_jsonl,
    write_trl_dataset,
    write_verl_parquet,
)

from rollcli.config.loader import load_recipe
from rollcli.config.recipe import RecipeConfig
from rollcli.data.prompt_sets import load_prompt_data
from rollcli.rewards.conventions import bind, reward_columns
from rollcli.rewards.runner import score_samples
from rollcli.rollout.prompt_scheduler import sample_fields
from rollcli.workers.reward import RewardArgs, RewardWorker


def _recipe(tmp_path: Path, reward: str, source: str, fn: str, *keys: str) -> RecipeConfig:
    (tmp_path / "reward.py").write_text(reward)
    cfg, _ = load_recipe(
        "rlvr-math",
        [
            f"reward.fn={tmp_path / 'reward.py'}:{fn}",
            f"data.path={source}",
            "data.val_size=2",
            *keys,
        ],
    )
    return cfg


def _scored(cfg: RecipeConfig, replies: list[str], finished: bool = True) -> list[dict]:
    """The first training prompts as training reads them, each answered with one of
    `replies`, scored by a reward worker built as training builds it."""
    prompts = load_prompt_data(cfg.data, cfg.seed, reward_columns(cfg.reward)).train
    samples = [
        {**sample_fields(p), "response": r, "finished": finished, "response_ids": [1, 2]}
        for p, r in zip(prompts, replies, strict=False)
    ]
    r = cfg.reward
    worker = RewardWorker(
        RewardArgs(r.fn, options=r.worker_options, timeout_s=5, convention=r.convention)
    )
    return worker.score(samples)


def test_a_verl_compute_score_reads_its_parquet_as_verl_passes_it(tmp_path: Path) -> None:
    """data_source and extra_info come from their columns, ground_truth from
    data.answer_key=reward_model.ground_truth; a dict's `score` trains, `acc` is a metric."""
    path = write_verl_parquet(tmp_path / "train.parquet")
    cfg = _recipe(
        tmp_path, VERL_REWARD, path, "compute_score", "data.answer_key=reward_model.ground_truth"
    )
    answers = [a for _, a in sums()]
    out = _scored(cfg, [f"so the answer is {answers[0]}.", "I think 0", "no idea"])
    assert [o["score"] for o in out] == [1.0, 0.0, 0.0]
    assert [o["error"] for o in out] == [None] * 3
    assert out[0]["acc"] == 1.0 and out[1]["index"] == 1.0  # extra_info's index, row 2


def test_trl_batched_conversational_rewards_get_lists_and_the_solution_column(
    tmp_path: Path,
) -> None:
    """TRL's accuracy_reward(completions, solution, **kwargs): completions as assistant
    message lists (the prompts are chats), `solution` (data.answer_key) under its own name."""
    path = write_trl_dataset(tmp_path / "saved")
    cfg = _recipe(tmp_path, TRL_REWARD, path, "accuracy_reward", "data.answer_key=solution")
    answers = [a for _, a in sums()]
    out = _scored(cfg, [answers[0], f"{answers[1]} apples, or 9", f"It is {answers[2]}."])
    assert [o["score"] for o in out] == [1.0, 0.0, 1.0]  # the last number: 4, 9 (not 7), 10
    cfg = _recipe(tmp_path, TRL_REWARD, path, "format_reward", "data.answer_key=solution")
    assert [o["score"] for o in _scored(cfg, ["4", "four", "x = 4."])] == [1.0, 0.0, 1.0]


def test_the_trl_call_roll_makes(tmp_path: Path) -> None:
    """The keywords TRL passes: prompts (messages), completions, completion_ids and every
    column as a list, one entry per sample."""
    path = write_trl_dataset(tmp_path / "saved")
    cfg = _recipe(tmp_path, TRL_REWARD, path, "accuracy_reward", "data.answer_key=solution")
    prompt = load_prompt_data(cfg.data, cfg.seed, reward_columns(cfg.reward)).train[0]
    sample = {**sample_fields(prompt), "response": "7", "finished": True, "response_ids": [7]}
    reward = bind(lambda completions, **kwargs: [0.0])
    args, kwargs = reward.arguments([sample], {"format_weight": 0.1})
    assert args == ()
    assert kwargs["completions"] == [[{"role": "assistant", "content": "7"}]]
    assert kwargs["prompts"] == [[{"role": "user", "content": "What is 3 + 1?"}]]
    assert kwargs["completion_ids"] == [[7]] and kwargs["solution"] == ["4"]
    assert kwargs["finished"] == [True] and "format_weight" not in kwargs  # not named


def test_trl_none_is_skipped_and_a_wrong_length_names_the_call() -> None:
    samples = [{"response": "1", "answer": "1"}, {"response": "2", "answer": "1"}]

    def code_only(completions, **kwargs):
        return [None, 1.0]

    out = score_samples(code_only, samples, {}, 5.0)
    assert [(o["score"], o["error"]) for o in out] == [(0.0, None), (1.0, None)]

    def one_value(completions, **kwargs):
        return [1.0]

    error = score_samples(one_value, samples, {}, 5.0)[0]["error"]
    assert error.startswith("one_value(prompts=['', ''], completions=['1', '2'], ")
    assert error.endswith("returned 1 values for 2 samples; a trl reward returns a list of "
                          "numbers (None: not scored), one per completion")  # fmt: skip


def test_an_openrlhf_reward_func_gets_queries_prompts_and_labels(tmp_path: Path) -> None:
    """queries = prompt + reply (so `query[len(prompt):]` is the reply); a dict's `rewards`
    train, `scores` and `extra_logs` become metrics."""
    path = write_openrlhf_jsonl(tmp_path / "train.jsonl")
    cfg = _recipe(
        tmp_path,
        OPENRLHF_REWARD,
        path,
        "reward_func",
        "data.prompt_key=input",
        "data.answer_key=label",
    )
    answers = [a for _, a in sums()]
    out = _scored(cfg, [f"It is {answers[0]}", "5"])
    assert [o["score"] for o in out] == [1.0, 0.0]
    assert out[0]["scores"] == 1.0
    question = sums()[0][0]
    assert out[0]["response_chars"] == len(question) + len(f"It is {answers[0]}")


def test_a_plain_score_gets_response_and_answer_only(tmp_path: Path) -> None:
    """`def score(response, answer)`: no tag, prompt or format_weight forced on it."""
    cfg = _recipe(tmp_path, PLAIN_REWARD, write_openrlhf_jsonl(tmp_path / "t.jsonl"), "score",
                  "data.prompt_key=input", "data.answer_key=label")  # fmt: skip
    assert [o["score"] for o in _scored(cfg, ["4", "x"])] == [1.0, 0.0]


def test_options_reach_only_rewards_that_name_them() -> None:
    sample = {"response": "ab", "answer": "", "tag": "t", "prompt": "p", "finished": False}
    opts = {"format_weight": 0.1, "scale": 3.0}

    def scaled(response, answer, *, scale=1.0, **fields):
        assert "format_weight" not in fields and fields["tag"] == "t"
        return scale * len(response)

    def reads_finished(response, finished):
        return float(finished)

    assert score_samples(scaled, [sample], opts, 5.0)[0]["score"] == 6.0
    assert score_samples(reads_finished, [sample], opts, 5.0)[0]["score"] == 0.0


def test_a_verl_reward_named_by_reward_convention() -> None:
    """`reward.convention` names a convention the signature does not show."""

    def score(*args, **kwargs):
        return float(kwargs["ground_truth"] == kwargs["solution_str"])

    sample = {"response": "4", "answer": "4"}
    assert score_samples(score, [sample], {}, 5.0, "verl")[0]["score"] == 1.0
    assert score_samples(score, [sample], {}, 5.0)[0]["error"].endswith("raised KeyError: "
                                                                        "'ground_truth'")  # fmt: skip


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        ("None", "returned None; a verl reward returns a number or a dict with 'score'"),
        ("{'acc': 1.0}", "returned {'acc': 1.0}; a verl reward returns a number or a dict"),
        ("'1.0'", "returned '1.0'; a verl reward returns a number"),
    ],
)
def test_a_return_that_is_not_a_score_says_what_came_back(tmp_path, returned, says) -> None:
    (tmp_path / "r.py").write_text(
        f"def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        f"    return {returned}\n"
    )
    from rollcli.rewards.registry import load_reward_fn

    fn = load_reward_fn(f"{tmp_path / 'r.py'}:compute_score")
    error = score_samples(fn, [{"response": "4", "answer": "4", "tag": "math"}], {}, 5.0)[0]
    call = "compute_score(data_source='math', solution_str='4', ground_truth='4', extra_info={})"
    assert error["error"].startswith(f"{call} {says}")


DOCS = Path(__file__).parents[2] / "docs" / "rewards.md"


def _doc_examples() -> dict[str, str]:
    """docs/rewards.md's example of each convention: function name -> its file."""
    text = DOCS.read_text()
    section = text[text.index("## Reward code from verl") : text.index("## Checked before")]
    blocks = section.split("```python\n")[1:]
    return {re.search(r"^def (\w+)", b, re.M).group(1): b.split("```")[0] for b in blocks}


def test_the_examples_in_rewards_md_work_unchanged(tmp_path: Path) -> None:
    """verl's, TRL's (conversational) and OpenRLHF's example, each called in its
    convention on the right reply and a wrong one."""
    from rollcli.rewards.registry import load_reward_fn

    examples = _doc_examples()
    assert sorted(examples) == ["accuracy_reward", "compute_score", "reward_func"]
    chat = [{"role": "user", "content": "What is 70 + 2?"}]
    for name, code in examples.items():
        (tmp_path / f"{name}.py").write_text(code)
        fn = load_reward_fn(f"{tmp_path / name}.py:{name}")
        samples = [
            {"response": reply, "answer": "72", "tag": "math", "prompt": chat[0]["content"],
             "messages": chat, "solution": "72", "finished": True}
            for reply in ("so it is 72", "it is 71")
        ]  # fmt: skip
        out = score_samples(fn, samples, {"format_weight": 0.1}, 5.0)
        assert [(o["score"], o["error"]) for o in out] == [(1.0, None), (0.0, None)], name
