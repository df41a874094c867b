"""roll's OpenAI-compatible endpoint: agent programs' chat requests served by the rollout
engine while a run collects their episodes.

Each episode gets its own base URL, ``http://127.0.0.1:PORT/<step tag>/<episode>/v1``, so
every request is tied to its episode without headers: an ``openai.OpenAI(base_url=...)``
client, or any program given the URL, posts to ``{base_url}/chat/completions``. A request
becomes the episode's next turn (`agent_conversation.AgentConversation`: token-exact, the
sampled ids are what trains), waits for its generation round (`agent_rounds.RoundGate`) and
is answered in OpenAI's chat-completion form, tool calls included. Served on loopback only,
with FastAPI and uvicorn (the optional ``agents`` extra, imported when a run uses an agent).

Only the run's own agents get in: loopback is shared by every process on the node, so each
server makes a random key (`EndpointServer.api_key`, new for every run, kept in memory
only) and every request must carry it as ``Authorization: Bearer <key>``, which an
``openai.OpenAI(api_key=...)`` client sends. A request without it is answered 401 in
OpenAI's error form (the client raises ``openai.AuthenticationError``) before its body is
read: it never becomes a turn, and is counted (`EndpointServer.take_refused`).

The run's sampling settings (`rollout.temperature`, `top_p`, `max_new_tokens`) govern every
reply, since the trainer's log-probs assume them: a request that asks for other values, for
several choices or for streaming is refused (HTTP 400, one line saying so), as is any
field the endpoint does not implement; ``model``, ``user`` and ``tool_choice: "auto"`` are
accepted.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations as objects
import asyncio
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rollcli.rollout.agent_conversation import AgentConversation, ConversationError
from rollcli.rollout.agent_rounds import GateClosed, RoundGate
from rollcli.strategies.sampling import SamplingParams

ACCEPTED = {"model", "messages", "tools", "user", "tool_choice"}
SAMPLING = {  # request field -> (SamplingParams attribute, recipe key)
    "temperature": ("temperature", "rollout.temperature"),
    "top_p": ("top_p", "rollout.top_p"),
    "max_tokens": ("max_new_tokens", "rollout.max_new_tokens"),
    "max_completion_tokens": ("max_new_tokens", "rollout.max_new_tokens"),
}
SINGLE = {"n": 1, "stream": False}


@dataclass
class StepEpisodes:
    """What the endpoint serves for one set of episodes (a step, or a validation)."""

    conversations: dict[int, AgentConversation]
    gate: RoundGate
    params: SamplingParams
    model: str
    busy: set[int] = field(default_factory=set)
    rejected: int = 0  # requests answered with an error


class EndpointServer:
    """The endpoint on loopback, in a background thread of the driver; `api_key` is the
    key its requests must carry (see the module docstring)."""

    def __init__(self) -> None:
        self.steps: dict[str, StepEpisodes] = {}
        self.port = 0
        self.api_key = f"roll-{secrets.token_urlsafe(32)}"
        self._refused = 0  # requests without the key, since the last `take_refused`
        self._refused_lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            build_app(self), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="roll-endpoint", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the agent endpoint (uvicorn on 127.0.0.1) did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None

    def base_url(self, tag: str, index: int) -> str:
        return f"http://127.0.0.1:{self.port}/{tag}/{index}/v1"

    def open(self, tag: str, episodes: StepEpisodes) -> None:
        self.steps[tag] = episodes

    def close(self, tag: str) -> None:
        self.steps.pop(tag, None)

    def __repr__(self) -> str:  # never the key
        return f"EndpointServer(http://127.0.0.1:{self.port}, steps={sorted(self.steps)})"

    # ---- the key -------------------------------------------------------------------------
    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries this run's key; counts a refusal."""
        scheme, _, token = (header or "").strip().partition(" ")
        ok = scheme.lower() == "bearer" and secrets.compare_digest(
            token.strip().encode(), self.api_key.encode()
        )
        if not ok:
            with self._refused_lock:
                self._refused += 1
        return ok

    def take_refused(self) -> int:
        """Requests refused for want of the key since the last call (then zero again)."""
        with self._refused_lock:
            count, self._refused = self._refused, 0
        return count

    # ---- one request ---------------------------------------------------------------------
    async def complete(self, tag: str, index: int, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for a chat-completion request of episode `index`."""
        step = self.steps.get(tag)
        conv = step.conversations.get(index) if step is not None else None
        if step is None or conv is None:
            return 404, _error(f"no running episode {tag}/{index}: its step is over", "not_found")
        if index in step.busy:
            step.rejected += 1
            return 409, _error(f"episode {index} already waits for a reply", "conflict")
        step.busy.add(index)
        try:
            check_fields(body, step.params)
            prompt = conv.prompt(body.get("messages"), body.get("tools"))
            future = step.gate.ask(index, conv.episode)
        except (ConversationError, GateClosed) as exc:
            step.busy.discard(index)
            step.rejected += 1
            if conv.episode.done:
                step.gate.end(conv.episode)
            return 400, _error(str(exc), "invalid_request_error")
        try:
            gen = await asyncio.wrap_future(future)
            message = conv.reply(gen)
        finally:
            step.busy.discard(index)
        finish = "tool_calls" if "tool_calls" in message else "stop"
        if not gen.get("finished", True):
            finish = "length"
        completion = len(gen["token_ids"])
        return 200, {
            "id": f"chatcmpl-{tag}-{index}-{conv.episode.turns}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": step.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
                "prompt_tokens_details": {"cached_tokens": int(gen.get("cached_tokens", 0))},
            },
        }


def check_fields(body: Any, params: SamplingParams) -> None:
    """Refuse what the endpoint cannot honour (see the module docstring)."""
    if not isinstance(body, dict):
        raise ConversationError("the request body is not a JSON object")
    for key, value in body.items():
        if key in ACCEPTED or value is None:
            continue
        if key in SAMPLING:
            attr, recipe_key = SAMPLING[key]
            run_value = getattr(params, attr)
            if not isinstance(value, (int, float)) or float(value) != float(run_value):
                raise ConversationError(
                    f"{key}={value!r}: the endpoint samples with the run's {recipe_key} = "
                    f"{run_value} (the trainer's log-probs assume it); set it in the recipe"
                )
        elif key in SINGLE:
            if value != SINGLE[key]:
                raise ConversationError(
                    f"{key}={value!r} is not supported: one non-streamed choice per request"
                )
        else:
            raise ConversationError(f"roll's endpoint does not support the field {key!r}")
    if body.get("tool_choice") not in (None, "auto"):
        raise ConversationError(
            f"tool_choice={body['tool_choice']!r} is not supported: the model decides (auto)"
        )


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


UNAUTHORIZED = (
    "this run's agent endpoint needs its key (Authorization: Bearer KEY): use the client "
    "roll gives the agent program, or ROLL_AGENT_API_KEY from its environment"
)


def build_app(server: EndpointServer) -> Any:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title="roll agent endpoint", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_key(request: Request, call_next: Any) -> Any:
        """Every route, before the body is read: no key, no turn (nor a model name)."""
        if server.authorized(request.headers.get("authorization")):
            return await call_next(request)
        body = _error(UNAUTHORIZED, "invalid_request_error", "invalid_api_key")
        return JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})

    @app.post("/{tag}/{index}/v1/chat/completions")
    async def chat_completions(tag: str, index: int, request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse(
                _error("the request body is not JSON", "invalid_request_error"), 400
            )
        status, payload = await server.complete(tag, index, body)
        return JSONResponse(payload, status)

    @app.get("/{tag}/{index}/v1/models")
    async def models(tag: str, index: int) -> JSONResponse:
        step = server.steps.get(tag)
        names = [step.model] if step is not None else []
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "roll"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    return app
