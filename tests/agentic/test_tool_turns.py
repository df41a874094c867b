"""Tool episodes as token ids: rendered by SmolLM2's real chat template (no tool support:
the tools are declared in the system prompt, results are user turns) and by a Qwen2.5-style
template (``tools=`` and ``tool`` messages), token-exact across turns, played through the
real scheduler and env worker with scripted replies."""

from __future__ import annotations

import json

import pytest

from rollcli.distributed.calls import Done
from rollcli.envs.tools.call_format import declare_tools
from rollcli.rollout.chat_turns import TurnFormat, renders_tools
from rollcli.rollout.episode import EpisodeSpec, Limits
from rollcli.rollout.episode_scheduler import play_episodes
from rollcli.workers.env_worker import EnvArgs, EnvWorker

# Qwen2.5-Instruct's tool handling, written out for the test: a "# Tools" section in the
# system turn, assistant tool calls as <tool_call> blocks, tool results as <tool_response>
# blocks inside a user turn (consecutive tool messages share one).
QWEN25_STYLE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}"
    "{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- else %}{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' }}{{- tool_call.name }}{{- \'", "arguments": \' }}'
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}"
    "{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
CALL = {"name": "calculator", "arguments": {"expression": "254 * 504 - 766"}}
SCRIPT = [
    "I will work it out.",  # neither a call nor an answer: an error observation (user turn)
    f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>",
    "So the answer is <answer>127250</answer>",
]


@pytest.fixture(scope="module")
def smollm2(tiny_model):
    """SmolLM2-135M-Instruct's own tokenizer and chat template (tiny-random shares them)."""
    from rollcli.strategies.hf_model import load_tokenizer

    return load_tokenizer(tiny_model)


@pytest.fixture(scope="module")
def qwen_style(tiny_model):
    """The same ChatML vocabulary with a Qwen2.5-style chat template."""
    from rollcli.strategies.hf_model import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    tokenizer.chat_template = QWEN25_STYLE
    return tokenizer


class TokenScript:
    """A policy replying from a script with token ids, as an engine does (ending in EOS);
    it records every prompt it is given."""

    free, width = True, 1

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer, self.texts, self.prompts, self.replies = tokenizer, texts, [], []

    def submit(self, episodes):
        out = []
        for ep in episodes:
            text = self.texts[ep.turns]
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            ids = [*ids, self.tokenizer.eos_token_id]
            self.prompts.append(ep.context_ids())
            self.replies.append(ids)
            out.append({"token_ids": ids, "text": text, "finished": True})
        return 0, Done(out)

    def collect(self, rank, handle):
        return handle.value

    def end(self, episode) -> None:
        pass

    def close(self) -> None:
        pass


def _play(tokenizer):
    host = EnvWorker(EnvArgs("tool", {"tools": ["calculator"], "max_steps": 4}))
    fmt = TurnFormat(tokenizer, host.instructions(), tools=host.tools())
    policy = TokenScript(tokenizer, SCRIPT)
    limits = Limits(max_turns=4, max_context_tokens=4096, max_new_tokens=64)
    (episode,), _ = play_episodes([host], policy, [EpisodeSpec(0, 0, 7)], fmt, limits)
    return fmt, policy, episode


def _check_token_exact(tokenizer, fmt, policy, episode, tools) -> str:
    """Each turn's prompt extends the last prompt and reply; the whole conversation decodes
    to what the template renders for its transcript; the loss mask is the replies."""
    assert episode.end == "terminated" and episode.rewards == [-0.1, 0.0, 1.0]
    assert episode.success and episode.error is None
    for k in range(len(policy.prompts) - 1):
        before = policy.prompts[k] + policy.replies[k]
        assert policy.prompts[k + 1][: len(before)] == before
    ids = episode.context_ids()
    assert ids == policy.prompts[-1] + policy.replies[-1]
    model = [t for t, m in zip(episode.response_ids, episode.loss_mask, strict=True) if m]
    assert model == [t for reply in policy.replies for t in reply]
    text = tokenizer.decode(ids)
    rendered = tokenizer.apply_chat_template(episode.messages, tools=tools, tokenize=False)
    assert rendered == text + fmt.close_after_eos
    return text


def test_smollm2_has_no_tool_support_so_the_tools_are_declared_in_the_system_prompt(smollm2):
    fmt, policy, episode = _play(smollm2)
    assert not fmt.native_tools and not renders_tools(smollm2, fmt.tools)
    text = _check_token_exact(smollm2, fmt, policy, episode, tools=None)
    assert [m["role"] for m in episode.messages] == [
        "system", "user", "assistant", "user", "assistant", "user", "assistant"
    ]  # fmt: skip
    assert fmt.system_prompt.endswith(declare_tools(fmt.tools))
    assert '"name": "calculator"' in text.split("<|im_end|>")[0]  # declared in the system turn
    assert "<|im_start|>user\n<tool_response>\n127250\n</tool_response><|im_end|>\n" in text
    assert "<|im_start|>user\nError: your reply has neither" in text


def test_a_qwen_style_template_gets_tools_and_tool_messages(qwen_style):
    fmt, policy, episode = _play(qwen_style)
    assert fmt.native_tools and renders_tools(qwen_style, fmt.tools)
    text = _check_token_exact(qwen_style, fmt, policy, episode, tools=fmt.tools)
    assert [m["role"] for m in episode.messages] == [
        "system", "user", "assistant", "user", "assistant", "tool", "assistant"
    ]  # fmt: skip
    system = text.split("<|im_end|>")[0]
    assert fmt.system_prompt in system and "# Tools" not in fmt.system_prompt
    assert "# Tools" in system and json.dumps(fmt.tools[0], ensure_ascii=False) in system
    assert "<|im_start|>user\n<tool_response>\n127250\n</tool_response><|im_end|>\n" in text
    assert episode.messages[5] == {"role": "tool", "content": "127250"}


def test_without_tools_the_format_is_unchanged(smollm2, qwen_style):
    for tokenizer in (smollm2, qwen_style):
        plain = TurnFormat(tokenizer, "RULES")
        assert not plain.native_tools and plain.system_prompt == "RULES"
        assert tokenizer.decode(plain.next_turn("obs", True)) == (
            "\n<|im_start|>user\nobs<|im_end|>\n<|im_start|>assistant\n"
        )
    with pytest.raises(ValueError, match="role is one of user, tool"):
        plain.next_turn("obs", True, role="assistant")
