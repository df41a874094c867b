"""roll's OpenAI-compatible endpoint, answered to the real `openai` client over loopback HTTP:
the shipped tool-math agent program gets the same token ids through it as the built-in tool
env gives (SmolLM2's template and a Qwen2.5-style one), a real hf engine's replies are
repeatable, and every request that cannot continue a token-exact episode is refused in one
line (the client raises `BadRequestError` with it)."""

from __future__ import annotations

import agentic.test_tool_turns as tool_turns  # its scripts, tokenizers and built-in play
import pytest

from rollcli.envs.tools import agent_example
from rollcli.rollout.agent_conversation import Formats
from rollcli.rollout.agent_episodes import play_agent_episodes
from rollcli.rollout.episode import EpisodeSpec, Limits
from rollcli.rollout.episode_scheduler import ModelPolicy
from rollcli.rollout.openai_server import EndpointServer
from rollcli.strategies.sampling import SamplingParams

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

TASK = {"prompt": "What is 254 × 504 - 766?", "answer": "127250", "seed": 7}


class ScriptedEngine:
    """An engine replying from a script with token ids ending in EOS, as an engine does
    (the test's stand-in for the model: the replies must be known to compare paths)."""

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer, self.texts, self.turns = tokenizer, texts, {}

    def generate(self, prompts, params, sessions=None, end_sessions=None):
        out = []
        for i, _ in enumerate(prompts):
            turn = self.turns[sessions[i]] = self.turns.get(sessions[i], -1) + 1
            text = self.texts[turn]
            ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"]]
            ids.append(self.tokenizer.eos_token_id)
            out.append({"prompt_index": i, "token_ids": ids, "text": text, "finished": True})
        return out

    def end_sessions(self, ids) -> None:
        pass


@pytest.fixture(scope="module")
def server():
    server = EndpointServer()
    server.start()
    yield server
    server.stop()


def _agent_play(server, tokenizer, engine, agent, n=1, params=None, limits=None):
    params = params or SamplingParams(max_new_tokens=64, temperature=1.0, seed=5)
    policy = ModelPolicy([engine], params, sessions=True)
    tasks = [(EpisodeSpec(i, i, 7), dict(TASK)) for i in range(n)]
    limits = limits or Limits(max_turns=4, max_context_tokens=4096, max_new_tokens=64)
    return play_agent_episodes(server, policy, agent, tasks, Formats(tokenizer), limits, "m", 60)


MALFORMED = '<tool_call>\n{"arguments": {"expression": "643 * 383"}}\n<answer>4</answer>'
SCRIPTS = {"plain": tool_turns.SCRIPT, "malformed": [MALFORMED, *tool_turns.SCRIPT[1:]]}


def _built_in(tokenizer, script):
    from rollcli.rollout.chat_turns import TurnFormat
    from rollcli.rollout.episode_scheduler import play_episodes
    from rollcli.workers.env_worker import EnvArgs, EnvWorker

    host = EnvWorker(EnvArgs("tool", {"tools": ["calculator"], "max_steps": 4}))
    fmt = TurnFormat(tokenizer, host.instructions(), tools=host.tools())
    policy = tool_turns.TokenScript(tokenizer, script)
    limits = Limits(max_turns=4, max_context_tokens=4096, max_new_tokens=64)
    (episode,), _ = play_episodes([host], policy, [EpisodeSpec(0, 0, 7)], fmt, limits)
    return episode


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("template", ["smollm2", "qwen_style"])
def test_the_agent_program_gets_the_built_in_envs_token_ids(server, template, script, request):
    """The shipped agent, talking through the client, builds exactly the ids, loss mask and
    return of the built-in env playing the same replies: a plain reply or a malformed call
    (an error turn), a tool call (returned as `tool_calls`, answered by a `tool` message),
    the answer."""
    tokenizer = request.getfixturevalue(template)
    built_in = _built_in(tokenizer, SCRIPTS[script])
    (episode,), stats = _agent_play(
        server, tokenizer, ScriptedEngine(tokenizer, SCRIPTS[script]), agent_example.run_episode
    )
    assert episode.error is None and episode.end == "terminated"
    assert episode.prompt_ids == built_in.prompt_ids
    assert episode.response_ids == built_in.response_ids
    assert episode.loss_mask == built_in.loss_mask
    assert episode.turn_spans == built_in.turn_spans
    assert episode.messages == built_in.messages
    assert episode.episode_return == pytest.approx(built_in.episode_return)  # -0.1 + 1
    assert episode.success
    assert [i["tool_call"] for i in episode.infos] == [int(script == "malformed"), 1, 0]
    assert stats["gen_calls"] == 3 and stats["agent_requests_refused"] == 0
    assert stats["agentic/template_drift"] == 0.0  # the transcript re-renders to these ids


smollm2 = tool_turns.smollm2
qwen_style = tool_turns.qwen_style


def test_a_real_engines_replies_repeat_and_are_trained_as_sampled(server, tiny_model) -> None:
    """Six programs at once against the hf engine: their requests arrive in any order, the
    rounds do not; two plays give the same tokens, and each reply's ids are the engine's
    (decoding them gives the text the client got)."""
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), session_mib=64))
    seen: dict[str, str] = {}

    def chatty(client, task):
        messages = [{"role": "user", "content": task["prompt"]}]
        for turn in range(3):
            reply = client.chat.completions.create(model="roll", messages=messages)
            assert reply.choices[0].finish_reason in ("stop", "length")
            assert reply.usage.completion_tokens > 0
            seen[f"{task['seed']}/{turn}"] = reply.choices[0].message.content
            messages += [reply.choices[0].message.model_dump(exclude_none=True)]
            messages += [{"role": "user", "content": "Go on."}]
        return 0.5

    def play():
        params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=5)
        policy = ModelPolicy([worker], params, sessions=True)
        tasks = [(EpisodeSpec(i, i // 2, 7), {**TASK, "seed": i}) for i in range(6)]
        limits = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens=8)
        tok = worker.tokenizer
        return play_agent_episodes(server, policy, chatty, tasks, Formats(tok), limits, "m", 60)

    first, stats = play()
    texts = dict(seen)
    second, _ = play()
    assert stats["gen_calls"] == 3 and stats["gen_batch_mean"] == 6
    assert [e.response_ids for e in first] == [e.response_ids for e in second]
    assert seen == texts
    for ep in first:
        assert ep.error is None and ep.turns == 3 and ep.episode_return == 0.5
        for k, (start, stop) in enumerate(ep.turn_spans):
            text = worker.tokenizer.decode(ep.response_ids[start:stop], skip_special_tokens=True)
            assert text == seen[f"{ep.spec.index}/{k}"]
            assert all(ep.loss_mask[start:stop])


def _refused(server, tokenizer, agent) -> tuple[str, object]:
    (episode,), stats = _agent_play(
        server, tokenizer, ScriptedEngine(tokenizer, ["Hi there."] * 5), agent
    )
    assert stats["agent_requests_refused"] == 1
    return episode.error or "", episode


def _first(client, **extra):
    messages = [{"role": "user", "content": "Hello"}]
    reply = client.chat.completions.create(model="roll", messages=messages, **extra)
    return messages + [reply.choices[0].message.model_dump(exclude_none=True)]


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (lambda c, t: _first(c, temperature=0.2), "run's rollout.temperature = 1.0"),
        (lambda c, t: _first(c, n=2), "one non-streamed choice"),
        (lambda c, t: _first(c, logprobs=True), "does not support the field 'logprobs'"),
        (
            lambda c, t: c.chat.completions.create(
                model="roll", messages=[{"role": "user", "content": "x"}], tool_choice="none"
            ),
            "the model decides",
        ),
        (
            lambda c, t: c.chat.completions.create(
                model="roll",
                messages=[
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                    {"role": "user", "content": "c"},
                ],
            ),
            "starts with one optional system message",
        ),
        (
            lambda c, t: c.chat.completions.create(
                model="roll",
                messages=[*_first(c)[:1], {"role": "assistant", "content": "edited"}]
                + [{"role": "user", "content": "more"}],
            ),
            "the assistant reply 1 differs",
        ),
        (
            lambda c, t: c.chat.completions.create(
                model="roll",
                messages=_first(c) + [{"role": "user", "content": "a"}] * 2,
            ),
            "adds exactly one tool or user message",
        ),
    ],
)
def test_requests_that_cannot_continue_the_episode_are_refused(server, smollm2, agent, says):
    """Each raises `openai.BadRequestError` in the program, with the reason; the episode is
    an error (not trained on), the run goes on."""
    error, _ = _refused(server, smollm2, agent)
    assert "BadRequestError" in error and says in error


def test_turn_and_context_limits_end_the_episode_as_the_built_in_envs_do(server, smollm2):
    def talker(client, task):
        messages = [{"role": "user", "content": "Hello"}]
        for _ in range(10):
            reply = client.chat.completions.create(model="roll", messages=messages)
            messages += [reply.choices[0].message.model_dump(exclude_none=True)]
            messages += [{"role": "user", "content": "again"}]
        return 1.0

    engine = ScriptedEngine(smollm2, ["Hi there."] * 10)
    (episode,), stats = _agent_play(server, smollm2, engine, _ignore(talker))
    assert episode.end == "max_turns" and episode.turns == 4 and episode.error is None
    assert episode.episode_return == 0.0 and stats["agent_requests_refused"] == 1
    engine = ScriptedEngine(smollm2, ["Hi there."] * 10)
    limits = Limits(max_turns=10, max_context_tokens=120, max_new_tokens=32)
    (episode,), _ = _agent_play(server, smollm2, engine, _ignore(talker), limits=limits)
    assert episode.end == "context" and episode.error is None and 0 < episode.turns < 10


def _ignore(agent):
    """The program as most are written: a refused request ends it with reward 0."""

    def run(client, task):
        try:
            return agent(client, task)
        except openai.BadRequestError:
            return 0.0

    return run


def test_a_program_that_fails_is_its_episodes_error_not_the_runs(server, smollm2) -> None:
    def broken(client, task):
        client.chat.completions.create(model="roll", messages=[{"role": "user", "content": "x"}])
        raise KeyError("oops")

    def silent(client, task):
        return 1.0

    def wrong(client, task):
        _first(client)
        return "yes"

    engine = ScriptedEngine(smollm2, ["Hi."] * 3)
    for program, says in [
        (broken, "KeyError: 'oops'"),
        (silent, "returned without asking for a reply"),
        (wrong, "returned 'yes'"),
    ]:
        (episode,), _ = _agent_play(server, smollm2, engine, program)
        assert says in (episode.error or "") and not episode.trainable
