"""A user's own world through the real CLI: raw GSM8K (`question`, `answer` ending in
`#### 72`) mapped by `data.*` keys, a reward in a file next to the recipe (no PYTHONPATH)
that asks for a column by name, a model by hub id from a hub-cache layout with
`HF_HUB_OFFLINE=1`, one prompt over `data.max_prompt_tokens`, and a 1,319-row validation
file sampled to `data.val_size`. Training, `roll eval` and `roll data preview` on it; the
same rows as parquet and as a `save_to_disk` folder (slow tier); DPO on HH-RLHF pairs and
SFT on a messages file through the same keys. The CLI app in this process, on the suite's
Ray session (tests/roll_in_process.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from error_text import flat
from hub_cache import cache_model_folder
from roll_in_process import cli

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
GSM8K, HH = SHARED / "gsm8k", SHARED / "hh-rlhf" / "harmless-base-test.jsonl.gz"
pytestmark = [
    pytest.mark.skipif(not GSM8K.exists(), reason=f"{GSM8K} is not on this machine"),
    pytest.mark.usefixtures("ray_session"),
]
HUB_MODEL = "roll-test/tiny-chat"
SMALL = [
    "--steps",
    "1",
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "train.micro_batch_size=4",
]
REWARD = '''from rollcli.rewards.math_rule import math_reward


def score(response, answer, *, level, **fields):
    """math, and the `level` column of the row (asked for by name) as a metric."""
    return {**math_reward(response, answer), "level": float(level)}
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_model) -> Path:
    """recipe.yaml + my_reward.py + 48 GSM8K rows (with a `level` column) and one
    overlong question, as jsonl, parquet and a save_to_disk folder; the hub cache."""
    import datasets

    root = tmp_path_factory.mktemp("own")
    lines = (GSM8K / "train.jsonl").read_text().splitlines()[:48]
    rows = [{**json.loads(line), "level": i % 3} for i, line in enumerate(lines)]
    rows.append({"question": "How many? " * 200, "answer": "#### 1", "level": 0})
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    test = [json.loads(line) for line in (GSM8K / "test.jsonl").read_text().splitlines()]
    (root / "test.jsonl").write_text(  # the 1,319 test problems, with the reward's column
        "".join(json.dumps({**r, "level": i % 3}) + "\n" for i, r in enumerate(test))
    )
    (root / "train-copy.jsonl").write_text((root / "train.jsonl").read_text())
    table = datasets.Dataset.from_list(rows)
    table.to_parquet(str(root / "train.parquet"))
    table.save_to_disk(str(root / "saved"))
    (root / "my_reward.py").write_text(REWARD)
    from rollcli.config.catalogue import find_recipe

    recipe = yaml.safe_load(find_recipe("rlvr-math")[1])
    recipe["data"] = {
        "path": "train.jsonl",  # next to the recipe
        "prompt_key": "question",
        "answer_pattern": r"####\s*(.+)$",
        "val_path": "test.jsonl",  # 1,319 rows
        "val_size": 8,
    }
    recipe["reward"] = {"fn": "./my_reward.py:score"}
    recipe["name"] = "gsm8k-mine"
    recipe.pop("aliases", None)
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    cache_model_folder(root / "hf" / "hub", HUB_MODEL, tiny_model)
    (root / "elsewhere").mkdir()  # the commands run from here: no PYTHONPATH, no cwd help
    return root


@pytest.fixture(scope="module")
def offline(world):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(world / "hf"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.chdir(world / "elsewhere")
        yield


@pytest.fixture(scope="module")
def gsm8k_run(world, offline) -> Path:
    runs = world / "runs"
    code, err = cli(
        "train", str(world / "recipe.yaml"), "--model", HUB_MODEL,
        "--runs-dir", str(runs), "--run-id", "jsonl", *SMALL,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    return runs / "jsonl"


def test_raw_gsm8k_trains_with_a_hub_model_and_a_reward_file(gsm8k_run: Path) -> None:
    events = (gsm8k_run / "events.log").read_text()
    assert f"model {HUB_MODEL} (" in events and "models--roll-test--tiny-chat/snapshots" in events
    assert "data: 1 of 49 training prompts over 256 tokens left out" in events
    assert "data: validation: a seeded sample of 8 of 1319 prompts" in events
    assert "on 8 held-out prompts" in events and "48 train / 8 validation prompts" in events
    rows = [json.loads(line) for line in (gsm8k_run / "metrics.jsonl").read_text().splitlines()]
    step = rows[-1]
    assert 0 <= step["reward/level"] <= 2  # the column the reward asked for reached it
    recipe = yaml.safe_load((gsm8k_run / "recipe.yaml").read_text())
    assert recipe["reward"]["fn"].endswith("/my_reward.py:score")  # absolute: resumes anywhere
    assert recipe["model"] == HUB_MODEL


def test_eval_evaluates_the_n_it_is_given(world, offline, gsm8k_run) -> None:
    from rollcli.config.loader import load_recipe
    from rollcli.evaluation.rlvr_eval import held_out_problems

    code, err = cli("eval", str(world / "recipe.yaml"), "--model", HUB_MODEL, "--n", "4", "--json")
    assert code == 0, err[-2000:]
    assert "4 held-out problems" in err
    cfg, _ = load_recipe(str(world / "recipe.yaml"))
    problems = held_out_problems(cfg, 4, cfg.seed)  # what eval scored: the run's first 4
    assert len(problems) == 4 and all("level" in p.columns for p in problems)


def test_preview_shows_the_prompt_and_the_parsed_answer(world, offline, capsys) -> None:
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    result = CliRunner().invoke(app, ["data", "preview", str(world / "recipe.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout.splitlines()[0])
    assert set(first) >= {"prompt", "prompt_tokens", "answer", "reward"}
    assert first["answer"] == "72" and first["reward"] == 1.0
    assert first["prompt"].endswith("<|im_start|>assistant\n")
    assert "Natalia sold clips" in first["prompt"] and first["prompt_tokens"] > 20


def test_overlong_error_refuses_before_ray(world, offline, monkeypatch) -> None:
    from rollcli.distributed import ray_session

    monkeypatch.setattr(ray_session, "start_ray", lambda *a, **k: pytest.fail("Ray started"))
    code, err = cli(
        "train", str(world / "recipe.yaml"), "--model", HUB_MODEL,
        "--runs-dir", str(world / "runs"), "data.overlong=error", *SMALL,
    )  # fmt: skip
    assert code == 2
    assert "1 of 49 training prompts are over data.max_prompt_tokens = 256 tokens" in flat(err)


@pytest.mark.slow
@pytest.mark.parametrize("copy", ["train.jsonl", "train.parquet", "saved"])
def test_rlvr_math_trains_on_each_copy_of_the_rows(world, offline, copy) -> None:
    """`rlvr-math` itself, its data replaced on the command line (jsonl, parquet and a
    save_to_disk folder of the same rows); preview's first answer is the pattern's."""
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    keys = [f"data.path={world / copy}", "data.prompt_key=question", "data.answer_key=answer"]
    keys += [r"data.answer_pattern=####\s*(.+)$", "data.val_size=8"]
    preview = CliRunner().invoke(app, ["data", "preview", "rlvr-math", *keys, "--json"])
    assert preview.exit_code == 0, preview.output
    assert json.loads(preview.stdout.splitlines()[0])["answer"] == "72"
    runs = world / "runs"
    run_id = f"math-{copy}"
    code, err = cli(
        "train", "rlvr-math", "--model", HUB_MODEL, *keys, "--runs-dir", str(runs),
        "--run-id", run_id, *SMALL,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    events = (runs / run_id / "events.log").read_text()  # the overlong row is held out last
    assert "41 train / 7 validation prompts" in events
    assert "1 of 8 validation prompts over 256 tokens left out" in events


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        (["data.prompt_key=null"], "set data.prompt_key (e.g. data.prompt_key=question)"),
        (["data.answer_key=solution"], "data.answer_key = 'solution' names no column"),
        ([r"data.answer_pattern=ANSWER:\s*(.+)"], "matches the answer of none of its"),
        (["data.val_path=../train-copy.jsonl"],
         "the first 49 validation rows are the first training rows"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["train", "--dry-run"], ["doctor"]])
def test_a_file_training_would_refuse_is_refused_first(world, offline, keys, says, command):
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    args = [command[0], str(world / "recipe.yaml"), *command[1:], *keys]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert lines[0].startswith("error: ") and all(len(x) <= 80 for x in lines)
    assert says in " ".join(x.strip() for x in lines)


@pytest.mark.skipif(not HH.exists(), reason=f"{HH} is not on this machine")
def test_dpo_on_hh_rlhf_and_sft_on_a_messages_file(world, offline) -> None:
    chats = [
        {"chat": [{"role": "user", "content": f"{i}+1?"}, {"role": "assistant", "content": str(i + 1)}]}
        for i in range(12)
    ]  # fmt: skip
    (world / "chats.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chats))
    runs = world / "runs"
    small = ["--model", "tiny-random", "--steps", "1", "--runs-dir", str(runs), "data.val_size=4"]
    code, err = cli(
        "train", "dpo", f"data.path={HH}", "data.chosen_key=chosen", "data.train_size=16",
        "dpo.batch_size=4", "dpo.max_response_tokens=16", "--run-id", "hh", *small,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    events = (runs / "hh" / "events.log").read_text()
    assert "data: 3 of 16 training pairs over 256 tokens left out" in events
    assert "13 train / 3 validation pairs" in events
    code, err = cli(
        "train", "sft", f"data.path={world / 'chats.jsonl'}", "data.messages_key=chat",
        "sft.batch_size=4", "sft.max_tokens=64", "rollout.max_new_tokens=4",
        "--run-id", "chat", *small,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert "8 train / 4 validation conversations" in (runs / "chat" / "events.log").read_text()
