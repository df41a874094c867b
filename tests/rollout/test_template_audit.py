"""Template drift, measured on real tool episodes (the real scheduler, env worker and
SmolLM2's tokenizer, scripted replies): none with SmolLM2's own template or a Qwen2.5-style
one; with a hand-made template that trims assistant turns (as templates that rewrite
earlier turns do) every turn after a reply ending in a newline drifts; a reply sampled in
other ids than its text tokenizes to drifts only for a pipeline that re-tokenizes; a
template that trims every message (as Llama 3's does) is followed by roll's own turns."""

from __future__ import annotations

import agentic.test_tool_turns as tool_turns
import pytest

from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import EpisodeSpec, Limits
from rollcli.rollout.episode_scheduler import play_episodes
from rollcli.rollout.template_audit import drifted_turns, template_drift
from rollcli.workers.env_worker import EnvArgs, EnvWorker

smollm2 = tool_turns.smollm2
qwen_style = tool_turns.qwen_style
SCRIPT = ["Let me think.\n", *tool_turns.SCRIPT[1:]]  # the first reply ends in a newline


class CharScript(tool_turns.TokenScript):
    """Samples the first reply a character at a time: the same text as the script's, in ids
    the tokenizer would never produce from it (as a sampler can)."""

    def submit(self, episodes):
        if episodes[0].turns:
            return super().submit(episodes)
        (ep,) = episodes
        text = self.texts[0]
        ids = [i for c in text for i in self.tokenizer(c, add_special_tokens=False)["input_ids"]]
        assert self.tokenizer.decode(ids) == text and ids != self.tokenizer.encode(text)
        ids.append(self.tokenizer.eos_token_id)
        return 0, tool_turns.Done([{"token_ids": ids, "text": text, "finished": True}])


def _play(tokenizer, script=tool_turns.TokenScript, replies=SCRIPT, user_suffix=""):
    host = EnvWorker(EnvArgs("tool", {"tools": ["calculator"], "max_steps": 4}))
    fmt = TurnFormat(tokenizer, host.instructions(), user_suffix=user_suffix, tools=host.tools())
    limits = Limits(max_turns=4, max_context_tokens=4096, max_new_tokens=64)
    policy = script(tokenizer, replies)
    (episode,), _ = play_episodes([host], policy, [EpisodeSpec(0, 0, 7)], fmt, limits)
    assert episode.turns == 3 and episode.success
    return episode, fmt


@pytest.mark.parametrize("template", ["smollm2", "qwen_style"])
def test_the_template_re_renders_the_sampled_tokens(template, request) -> None:
    episode, fmt = _play(request.getfixturevalue(template))
    assert drifted_turns(episode, fmt) == (0, 0, 2)
    assert template_drift([(episode, fmt)]) == {
        "agentic/template_drift": 0.0,
        "agentic/template_drift_turns": 0.0,
        "agentic/retokenize_drift": 0.0,
    }


def _rewritten(tiny_model, content: str):
    """SmolLM2's tokenizer with every message's content rendered as `content` (jinja)."""
    from rollcli.strategies.hf_model import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    template = tokenizer.chat_template
    assert "message['content']" in template
    tokenizer.chat_template = template.replace("message['content']", content)
    return tokenizer


def test_a_template_that_trims_replies_drifts_on_every_later_turn(tiny_model) -> None:
    """The episode is built from the sampled ids ("Let me think.\\n" then EOS); rendering
    its transcript with this template drops the newline, so the prompts of turns 2 and 3
    would not be what the model saw, whichever way the replies are taken."""
    trimming = _rewritten(
        tiny_model,
        "(message['content'] | trim if message['role'] == 'assistant' else message['content'])",
    )
    episode, fmt = _play(trimming)
    assert drifted_turns(episode, fmt) == (2, 2, 2)
    drift = template_drift([(episode, fmt)])
    assert drift["agentic/template_drift"] == drift["agentic/retokenize_drift"] == 1.0
    assert drift["agentic/template_drift_turns"] == 2.0
    assert template_drift([]) == {}


def test_a_reply_sampled_in_other_ids_than_its_text_tokenizes_to_drifts_in_ids_only(
    smollm2,
) -> None:
    """SmolLM2's own template, but the first reply was sampled a character at a time: the
    transcript re-renders to the same text in other ids, so both later turns drift for a
    pipeline that re-tokenizes, and none for the template (the replies taken as sampled)."""
    episode, fmt = _play(smollm2, CharScript)
    assert drifted_turns(episode, fmt) == (0, 2, 2)
    drift = template_drift([(episode, fmt)])
    assert drift["agentic/template_drift"] == 0.0 and drift["agentic/retokenize_drift"] == 1.0


def test_a_template_that_trims_every_message_is_followed_by_the_turns_roll_builds(
    tiny_model,
) -> None:
    """Llama 3's template trims every message. The user turns here end in a newline
    (`user_suffix`): roll renders each observation through the template, so its turns are
    the template's; only a reply ending in a newline (which the template trims) drifts, and
    only the turns after it."""
    trim_all = _rewritten(tiny_model, "(message['content'] | trim)")
    replies = ["Let me think.", *tool_turns.SCRIPT[1:]]
    episode, fmt = _play(trim_all, replies=replies, user_suffix="\n")
    users = [m["content"] for m in episode.messages if m["role"] == "user"]
    assert users[1].endswith("answer>.\n")  # the error observation, trimmed when rendered
    assert drifted_turns(episode, fmt) == (0, 0, 2)
    episode, fmt = _play(trim_all, user_suffix="\n")
    assert drifted_turns(episode, fmt) == (2, 2, 2)
