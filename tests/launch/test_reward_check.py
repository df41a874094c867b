"""A user's reward is called before anything starts (issue #81, item 2): `roll train
--dry-run`, `roll doctor`, `roll data preview` and `roll eval` refuse a reward that cannot
score the first prompts' reference answers, in one line naming the call roll made and what
came back (exit 2); a raise on a wrong reply is a warning. Through the real CLI, on a
jsonl of sums (tests/other_projects.py) and tiny-random's tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
from error_text import error_message, flat
from other_projects import TRL_REWARD, write_openrlhf_jsonl, write_trl_dataset
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.launch.reward_check import check_reward_calls

RAISES = "def score(response, answer):\n    raise ValueError('no parser for ' + response)\n"
NEEDS_INTS = "def score(response, answer):\n    return float(int(response) == int(answer))\n"
UNCALLABLE = "def score(response, answer, reference):\n    return 1.0\n"
TRL_SHORT = "def accuracy_reward(completions, **kwargs):\n    return [1.0]\n"


def _keys(tmp_path: Path, code: str, fn: str = "score") -> list[str]:
    (tmp_path / "r.py").write_text(code)
    data = write_openrlhf_jsonl(tmp_path / "sums.jsonl")
    return [
        f"reward.fn={tmp_path / 'r.py'}:{fn}",
        f"data.path={data}",
        "data.prompt_key=input",
        "data.answer_key=label",
        "data.val_size=2",
    ]


def _refusal(tmp_path: Path, code: str, fn: str = "score") -> str:
    cfg, _ = load_recipe("rlvr-math", _keys(tmp_path, code, fn))
    with pytest.raises(ConfigError) as err:
        check_reward_calls(cfg)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_reward_that_raises_on_the_reference_answer_is_refused(tmp_path: Path) -> None:
    assert _refusal(tmp_path, RAISES) == (
        f"reward.fn = '{tmp_path}/r.py:score' (roll convention) cannot score the reference "
        "answer '4' as a reply: score('4', '4') raised ValueError: no parser for 4"
    )


def test_a_reward_that_cannot_be_called_is_refused_naming_the_call(tmp_path: Path) -> None:
    assert _refusal(tmp_path, UNCALLABLE).endswith(
        "score('4', '4') raised TypeError: score() missing 1 required positional argument: "
        "'reference'"
    )


def test_a_batch_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    """Two first rows, one call, one value back."""
    assert _refusal(tmp_path, TRL_SHORT, "accuracy_reward").endswith(
        "returned 1 values for 2 samples; a trl reward returns a list of numbers (None: not "
        "scored), one per completion"
    )


def test_a_raise_on_a_wrong_reply_is_a_warning(tmp_path: Path) -> None:
    cfg, _ = load_recipe("rlvr-math", _keys(tmp_path, NEEDS_INTS))
    [warning] = check_reward_calls(cfg)
    assert warning.startswith(f"warning: reward.fn = '{tmp_path}/r.py:score' fails on the reply")
    assert warning.endswith(
        "score('I am not sure.', '4') raised ValueError: invalid literal for int() with base "
        "10: 'I am not sure.'"
    )


def test_a_trl_reward_on_its_conversational_data_passes(tmp_path: Path) -> None:
    (tmp_path / "r.py").write_text(TRL_REWARD)
    data = write_trl_dataset(tmp_path / "saved")
    cfg, _ = load_recipe(
        "rlvr-math",
        [f"reward.fn={tmp_path / 'r.py'}:accuracy_reward", f"data.path={data}",
         "data.answer_key=solution", "data.val_size=2"],
    )  # fmt: skip
    assert check_reward_calls(cfg) == []


def test_built_in_rewards_are_not_called(monkeypatch) -> None:
    from rollcli.data import first_prompts

    monkeypatch.setattr(first_prompts, "first_prompts", lambda *a: pytest.fail("data read"))
    assert check_reward_calls(load_recipe("rlvr-math", [])[0]) == []


@pytest.mark.parametrize(
    "command",
    [
        ["train", "rlvr-math", "--dry-run", "--model", "tiny-random"],
        ["doctor", "rlvr-math", "model=tiny-random"],
        ["data", "preview", "rlvr-math", "--model", "tiny-random"],
        ["eval", "rlvr-math", "--model", "tiny-random", "--n", "2"],
    ],
)
def test_each_command_refuses_it_in_one_line(tmp_path: Path, command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, *_keys(tmp_path, RAISES)], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert error_message(result.stderr[result.stderr.index("error:") :]) == (
        f"error: reward.fn = '{tmp_path}/r.py:score' (roll convention) cannot score the "
        "reference answer '4' as a reply: score('4', '4') raised ValueError: no parser for 4"
    )
    assert "Traceback" not in result.output


def test_dry_run_warns_of_a_raise_on_a_wrong_reply(tmp_path: Path) -> None:
    args = ["train", "rlvr-math", "--dry-run", "--model", "tiny-random"]
    result = CliRunner().invoke(app, [*args, *_keys(tmp_path, NEEDS_INTS)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert f"warning: reward.fn = '{tmp_path}/r.py:score' fails on the reply 'I am not sure.'" in (
        flat(result.stderr)
    )
