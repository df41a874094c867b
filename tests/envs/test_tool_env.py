"""The `tool` environment: every malformed or failing call is an error observation and a
counted metric, never a crash; scripted episodes end with the judge's reward or at the turn
limit; user tools and tasks plug in as ``package.module:function``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcli.envs.layout_split import layout_split
from rollcli.envs.registry import make
from rollcli.envs.tools.env import TOOL_ERRORS, ToolEnv
from rollcli.envs.tools.tasks import TaskSource, arithmetic
from rollcli.rewards.sandbox import detect_isolation
from rollcli.rollout.episode import Episode, EpisodeSpec
from rollcli.rollout.episode_metrics import episode_metrics, summary_line

needs_sandbox = pytest.mark.skipif(
    not detect_isolation()["strong"], reason="no network+mount namespaces here (docs/sandbox.md)"
)


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def _env(**kwargs: object) -> ToolEnv:
    env = ToolEnv(**kwargs)
    env.reset(seed=7)  # 'What is 254 × 504 - 766?' = 127250
    return env


# ---- scripted episodes ------------------------------------------------------------------------
def test_a_tool_call_then_the_right_answer_scores_1() -> None:
    env = _env(max_steps=3)
    obs, reward, terminated, truncated, info = env.step(
        "Let me compute. " + call("calculator", expression="254 * 504 - 766")
    )
    assert (obs, reward, terminated, truncated) == ("127250", 0.0, False, False)
    assert info["action"] == "calculator" and info["action_is_effective"]
    assert (info["tool_call"], info["tool_error"], info["observation_role"]) == (1, "", "tool")
    obs, reward, terminated, truncated, info = env.step("The answer is <answer>127250</answer>")
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert info["action"] == "answer" and info["tool_call"] == 0


def test_a_wrong_answer_scores_0_and_ends_the_episode() -> None:
    env = _env()
    _, reward, terminated, _, info = env.step("<answer>127251</answer>")
    assert (reward, terminated) == (0.0, True)
    assert info["action_is_valid"] and not info["success"]


def test_the_turn_limit_truncates_with_no_reward() -> None:
    env = _env(max_steps=2)
    ends = [env.step(call("calculator", expression="1 + 1"))[1:4] for _ in range(2)]
    assert ends == [(0.0, False, False), (0.0, False, True)]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>1</answer>")


def test_only_the_first_call_of_a_reply_runs_and_the_observation_says_so() -> None:
    env = _env()
    reply = call("calculator", expression="2 * 3") + call("calculator", expression="2 * 4")
    obs, *_, info = env.step(reply)
    assert obs == "6\n(only the first tool call of a reply is run)" and info["tool_error"] == ""
    assert env.get_state_key().endswith("\n6")


def test_the_state_key_grows_with_each_result_but_not_with_errors() -> None:
    env = _env()
    key = env.get_state_key()
    env.step(call("calculator", expression="import os"))
    assert env.get_state_key() == key
    env.step(call("calculator", expression="254 * 504"))
    assert env.get_state_key() == key + "\n128016"


# ---- error observations -------------------------------------------------------------------------
MALFORMED = '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}</tool_call>'


@pytest.mark.parametrize(
    ("reply", "kind", "valid", "says"),
    [
        (MALFORMED, "malformed", False, "not valid JSON"),
        ("<tool_call>calculator(1 + 1)</tool_call>", "malformed", False, "not valid JSON"),
        ('<tool_call>["calculator", "1+1"]</tool_call>', "malformed", False, "a tool call is"),
        ('<tool_call>{"name": "calculator", "arguments": ', "malformed", False, "not closed"),
        (call("weather", city="Paris"), "unknown_tool", False, "there is no tool 'weather'"),
        (call("calculator"), "bad_arguments", False, "'expression' is a required property"),
        (call("calculator", expression="1", precision=3), "bad_arguments", False, "unexpected argument 'precision'"),
        (call("calculator", expression=12), "bad_arguments", False, "12 is not of type 'string'"),
        (call("calculator", expression="__import__('os').getcwd()"), "raised", True, "not a call"),
        (call("calculator", expression="10 ** 1000"), "raised", True, "more than 100 digits"),
    ],
)  # fmt: skip
def test_a_call_that_cannot_run_is_an_error_observation_and_a_counted_kind(
    reply: str, kind: str, valid: bool, says: str
) -> None:
    env = _env(format_penalty=-0.25)
    obs, reward, terminated, truncated, info = env.step(reply)
    assert obs.startswith("Error: ") and says in obs
    assert (terminated, truncated) == (False, False)
    assert (info["tool_call"], info["tool_error"], info["observation_role"]) == (1, kind, "tool")
    assert info["action_is_valid"] is valid and not info["action_is_effective"]
    assert reward == info["format_penalty"] == (0.0 if valid else -0.25)
    assert kind in TOOL_ERRORS


@pytest.mark.parametrize(
    ("reply", "says"),
    [("I think it is about 128 thousand.", "neither a tool call nor a final answer"),
     ("<answer>a big number</answer>", "holds no number"), ("", "neither")],
)  # fmt: skip
def test_a_reply_without_a_call_or_a_numeric_answer_is_invalid_but_no_tool_error(
    reply: str, says: str
) -> None:
    env = _env()
    obs, reward, terminated, _, info = env.step(reply)
    assert obs.startswith("Error: ") and says in obs and not terminated
    assert (info["tool_call"], info["tool_error"], info["observation_role"]) == (0, "", "user")
    assert reward == -0.1 and not info["action_is_valid"]


def test_a_user_tool_that_raises_or_hangs_is_an_error_observation(
    tmp_path: Path, monkeypatch
) -> None:
    (tmp_path / "flaky_tools_for_test.py").write_text(
        "import time\n\n"
        "def lookup(key: str) -> str:\n"
        '    """Look a key up.\n\n    Args:\n        key: the key\n    """\n'
        "    return {'a': 'alpha'}[key]\n\n"
        "def hang(seconds: float) -> str:\n"
        '    """Wait.\n\n    Args:\n        seconds: how long\n    """\n'
        "    time.sleep(seconds)\n    return 'done'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    refs = ["flaky_tools_for_test:lookup", "flaky_tools_for_test:hang"]
    env = _env(tools=refs, tool_timeout_s=0.2)
    assert env.action_names == ["lookup", "hang", "answer"]
    assert env.step(call("lookup", key="a"))[0] == "alpha"
    obs, _, _, _, info = env.step(call("lookup", key="b"))
    assert (obs, info["tool_error"]) == ("Error: lookup: KeyError: 'b'", "raised")
    obs, _, _, _, info = env.step(call("hang", seconds=3))
    assert obs == "Error: hang: the tool ran past its 0.2 s limit"
    assert info["tool_error"] == "timeout"


def test_a_long_result_keeps_its_head_and_tail() -> None:
    env = _env(max_result_chars=60)
    obs = env.step(call("calculator", expression="11 ** 90"))[0]
    assert len(obs) < 100 and "characters cut" in obs
    assert obs.startswith(str(11**90)[:10]) and obs.endswith(str(11**90)[-10:])


# ---- the python tool in the real sandbox -----------------------------------------------------------
@needs_sandbox
def test_the_python_tool_runs_in_the_sandbox_with_its_limits() -> None:
    env = _env(tools=["python"], tool_timeout_s=1.0, max_steps=6)
    obs, _, _, _, info = env.step(call("python", code="print(254 * 504 - 766)"))
    assert (obs, info["tool_error"]) == ("127250\n", "")
    obs, _, _, _, info = env.step(call("python", code="x = 1"))
    assert obs == "(no output)" and info["tool_error"] == ""
    obs, _, _, _, info = env.step(call("python", code="print('start')\n1 / 0"))
    assert info["tool_error"] == "raised" and info["action_is_valid"]
    assert obs.startswith("Error: python: start\nTraceback") and "ZeroDivisionError" in obs
    obs, _, _, _, info = env.step(
        call("python", code="import socket; socket.create_connection(('1.1.1.1', 53))")
    )
    assert info["tool_error"] == "raised" and "Network is unreachable" in obs
    obs, _, terminated, _, info = env.step(call("python", code="while True:\n    pass"))
    assert info["tool_error"] == "timeout" and not terminated
    assert obs == "Error: python: the program ran past the 1 s limit"


# ---- the expert (the warm-up's demonstrations) ---------------------------------------------------
def test_the_expert_calls_the_calculator_on_the_expression_then_answers_its_result() -> None:
    for seed in range(40):
        env = ToolEnv(tasks="arithmetic", max_steps=3)
        prompt, _ = env.reset(seed=seed)
        first = env.expert_reply()
        expression = prompt.removeprefix("What is ").removesuffix("?")
        assert first == call("calculator", expression=expression).replace(
            json.dumps(expression), json.dumps(expression, ensure_ascii=False)
        )  # the expression as the prompt writes it, "×" included
        obs, reward, terminated, _, info = env.step(first)
        assert (reward, terminated, info["tool_error"]) == (0.0, False, "")
        assert env.expert_reply() == f"<answer>{obs}</answer>"
        _, reward, terminated, _, info = env.step(env.expert_reply())
        assert (reward, terminated, info["success"]) == (1.0, True, True)


@needs_sandbox
def test_without_a_calculator_the_expert_prints_the_expression_with_python() -> None:
    env = _env(tools=["python"], max_steps=3)
    assert env.expert_reply() == call("python", code="print(254 * 504 - 766)")
    env.step(env.expert_reply())
    assert env.expert_reply() == "<answer>127250</answer>"  # the printed line, stripped


def test_a_task_the_expert_cannot_solve_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "city_tasks_for_test.py").write_text(
        "def tasks(seed):\n    return {'prompt': 'Capital of France?', 'answer': 'Paris'}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make("tool", tasks="city_tasks_for_test:tasks")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="solves arithmetic tasks .* not 'Capital of France\\?'"):
        env.expert_reply()


# ---- metrics, tasks, registration -----------------------------------------------------------------------
def test_tool_errors_become_episode_metrics() -> None:
    env = _env(max_steps=5)
    infos = [env.step(reply)[4] for reply in [
        MALFORMED, call("weather"), call("calculator", expression="2 * 3"),
        call("calculator", expression="2 ** 99999"), "<answer>127250</answer>",
    ]]  # fmt: skip
    metrics = episode_metrics([Episode(EpisodeSpec(0, 0, 7), infos=infos)], "env")
    assert metrics["env/tool_calls"] == metrics["env/tool_calls_per_episode"] == 4.0
    assert metrics["env/tool_errors"] == 3.0
    assert metrics["env/tool_call_valid"] == 0.25
    errors = {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if "/tool_error/" in k}
    assert errors == {"malformed": 1.0, "unknown_tool": 1.0, "bad_arguments": 0.0, "raised": 1.0,
                      "timeout": 0.0}  # fmt: skip
    assert metrics["env/format_errors"] == 2.0
    assert " · valid 0.60 · calls 4.00 · steps " in summary_line(metrics, "env")  # live line
    frozen = episode_metrics(
        [Episode(EpisodeSpec(0, 0, 7), infos=[{"action_is_valid": True}])], "env"
    )
    assert not any("tool" in k for k in frozen)


def test_arithmetic_tasks_are_seeded_and_the_validation_split_is_held_out() -> None:
    assert arithmetic(seed=5) == arithmetic(seed=5)
    for seed in range(30):
        task = arithmetic(seed=seed)
        expression = task["prompt"].removeprefix("What is ").removesuffix("?")
        assert eval(expression.replace("×", "*")) == int(task["answer"])  # our own text
    train = TaskSource("arithmetic", split="train")
    val = TaskSource("arithmetic", split="validation")
    train_prompts = {train.task(s).prompt for s in range(200)}
    val_prompts = {val.task(1_000_000 + s).prompt for s in range(50)}
    assert {layout_split(p) for p in train_prompts} == {"train"}
    assert {layout_split(p) for p in val_prompts} == {"validation"}
    assert not train_prompts & val_prompts
    env = ToolEnv(layouts="validation")
    assert layout_split(env.reset(seed=3)[0]) == "validation"


def test_user_tasks_and_judge_as_package_module_function(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "capital_tasks_for_test.py").write_text(
        "TASKS = [{'prompt': 'Capital of France?', 'answer': 'Paris'},\n"
        "         {'prompt': 'Capital of Italy?', 'answer': 'Rome'}]\n\n"
        "def tasks(seed):\n    return TASKS[seed % len(TASKS)]\n\n"
        "def lenient(answer, expected):\n    return expected.lower() in answer.lower()\n\n"
        "def broken(seed):\n    return {'question': 'x', 'answer': 1}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make("tool", tasks="capital_tasks_for_test:tasks", judge="capital_tasks_for_test:lenient")
    assert env.reset(seed=1)[0] == "Capital of Italy?"
    _, reward, terminated, _, info = env.step("<answer>It is rome.</answer>")
    assert (reward, terminated, info["success"]) == (1.0, True, True)
    with pytest.raises(ValueError, match="a task has unknown keys \\['question'\\]"):
        ToolEnv(tasks="capital_tasks_for_test:broken")
    with pytest.raises(ValueError, match="unknown tasks 'arithmetc' \\(did you mean 'arithmetic'"):
        ToolEnv(tasks="arithmetc")
    with pytest.raises(ValueError, match="unknown judge 'numbers'"):
        ToolEnv(judge="numbers")
