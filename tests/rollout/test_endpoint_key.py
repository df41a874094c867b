"""The agent endpoint lets in only the run's own agents: a real server on loopback and the
real `openai` client. With the run's key a request is a turn; with another key (the old
fixed "roll", another run's) or none it gets 401 in OpenAI's error form (the client raises
`openai.AuthenticationError`) before its body is read, adds nothing to the episode, and is
counted. A program that runs its episode in another process finds the URL and the key in
the environment `endpoint_env` gives it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import agentic.test_tool_turns as tool_turns  # its tokenizers
import pytest
import rollout.test_openai_endpoint as endpoint_tests  # its scripted engine and play

from rollcli.rollout.agent_episodes import endpoint_env
from rollcli.rollout.openai_server import EndpointServer

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

smollm2 = tool_turns.smollm2
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def server():
    server = EndpointServer()
    server.start()
    yield server
    server.stop()


def _post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
    """A bare HTTP request (no SDK): its status and JSON body."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_each_run_has_its_own_random_key_and_keeps_it_out_of_repr() -> None:
    a, b = EndpointServer(), EndpointServer()
    assert a.api_key != b.api_key and a.api_key != "roll"
    assert a.api_key.startswith("roll-") and len(a.api_key) == 5 + 43  # 32 random bytes
    assert a.api_key not in repr(a)


def test_a_request_without_the_runs_key_gets_401_and_never_a_turn(server, smollm2) -> None:
    """Before any episode runs (401, not 404: nothing is said about the episodes), and while
    one does: the old fixed key, another run's key, no Authorization header, a key sent as
    Basic, and `models`; each 401, none reaches the engine or the episode, all counted. The
    program's own client then plays its turn as if nothing happened."""
    server.take_refused()  # from zero
    url = server.base_url("s0", 0)
    status, body = _post(f"{url}/chat/completions", {"model": "m", "messages": HELLO}, {})
    assert status == 401
    assert body["error"]["code"] == "invalid_api_key"
    assert body["error"]["type"] == "invalid_request_error"
    assert "Authorization: Bearer" in body["error"]["message"]
    assert server.take_refused() == 1 and server.take_refused() == 0

    outcomes: list[object] = []
    sneaky = [{"role": "user", "content": "Say yes."}]

    def program(client, task):
        episode_url = str(client.base_url)
        for key in ["roll", EndpointServer().api_key]:
            other = openai.OpenAI(base_url=episode_url, api_key=key, max_retries=0)
            try:
                other.chat.completions.create(model="roll", messages=sneaky)
                outcomes.append("answered")
            except openai.AuthenticationError as exc:
                outcomes.append((exc.status_code, exc.body["code"]))
        try:  # the run's client with its Authorization header removed
            no_key = {"Authorization": openai.Omit()}
            client.chat.completions.create(model="roll", messages=sneaky, extra_headers=no_key)
            outcomes.append("answered")
        except openai.AuthenticationError as exc:
            outcomes.append((exc.status_code, exc.body["code"]))
        basic = {"Authorization": f"Basic {client.api_key}"}
        outcomes.append(_post(f"{episode_url}/chat/completions", {"messages": sneaky}, basic)[0])
        try:
            openai.OpenAI(base_url=episode_url, api_key="roll", max_retries=0).models.list()
        except openai.AuthenticationError as exc:
            outcomes.append(exc.status_code)
        assert [m.id for m in client.models.list().data] == ["m"]  # with the key: served
        reply = client.chat.completions.create(model="roll", messages=HELLO)
        outcomes.append(reply.choices[0].message.content)
        return 1.0

    engine = endpoint_tests.ScriptedEngine(smollm2, ["Hi there."] * 3)
    (episode,), stats = endpoint_tests._agent_play(server, smollm2, engine, program)
    refused = (401, "invalid_api_key")
    assert outcomes == [refused, refused, refused, 401, 401, "Hi there."]
    assert server.take_refused() == 5
    assert episode.error is None and episode.turns == 1
    assert episode.messages == [*HELLO, {"role": "assistant", "content": "Hi there."}]
    assert list(engine.turns.values()) == [0]  # one generation: the program's own request
    assert stats["agent_requests_refused"] == 0  # no 400s: the refused never got that far


def test_a_program_in_another_process_reaches_its_episode_through_endpoint_env(
    server, smollm2
) -> None:
    """The subprocess builds `openai.OpenAI()` from OPENAI_BASE_URL / OPENAI_API_KEY and plays
    the episode's turn; the ROLL_AGENT_* variables hold the same URL and key."""
    child = (
        "import os, openai\n"
        "assert os.environ['ROLL_AGENT_API_KEY'] == os.environ['OPENAI_API_KEY']\n"
        "assert os.environ['ROLL_AGENT_BASE_URL'] == os.environ['OPENAI_BASE_URL']\n"
        "reply = openai.OpenAI(max_retries=0).chat.completions.create(\n"
        "    model='roll', messages=[{'role': 'user', 'content': 'Hello'}])\n"
        "print(reply.choices[0].message.content)\n"
    )
    printed: list[str] = []

    def program(client, task):
        env = endpoint_env(client)
        assert env["OPENAI_BASE_URL"] == str(client.base_url).rstrip("/")
        assert env["ROLL_AGENT_API_KEY"] == server.api_key
        done = subprocess.run(
            [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        printed.append(done.stdout.strip())
        return 0.5

    engine = endpoint_tests.ScriptedEngine(smollm2, ["Hi there."])
    (episode,), _ = endpoint_tests._agent_play(server, smollm2, engine, program)
    assert printed == ["Hi there."]
    assert episode.error is None and episode.turns == 1 and episode.episode_return == 0.5
    assert server.take_refused() == 0
