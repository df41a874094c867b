"""Episodes played by an agent program through roll's OpenAI-compatible endpoint.

An agent program is a plain function (`agentic.agent: "package.module:function"`)::

    def run_episode(client: openai.OpenAI, task: dict) -> float:
        ...  # chat with client.chat.completions.create(...), call tools, judge the answer
        return reward

Each episode runs it in a thread of its own with a client whose base URL is that episode's
and whose key is the run's (the endpoint refuses requests without it); a program that
hands the episode to another process gives it `endpoint_env(client)` as its environment
(``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` and ``ROLL_AGENT_BASE_URL`` /
``ROLL_AGENT_API_KEY``). The `task` dict holds the task source's ``prompt`` and ``answer``
and the episode's ``seed``. Its return value is the episode's reward, given to the last
reply. A program that raises or returns no number ends its episode with an error: kept in
the samples, not trained on, counted (``env/env_errors``); the run goes on. One that stops
asking for replies and does not return within `agentic.agent_timeout_s` is no longer
waited for (its episode is an error too).
An episode cut by `agentic.max_turns` or `max_context_tokens` ends as with the built-in
environments (its program's next request is refused; what it returns then is its reward).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rollcli.config.agent_extra import require_agent_extra
from rollcli.rollout.agent_conversation import AgentConversation, Formats
from rollcli.rollout.agent_rounds import RoundGate
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits
from rollcli.rollout.episode_scheduler import ModelPolicy, ProgressFn
from rollcli.rollout.openai_server import EndpointServer, StepEpisodes
from rollcli.rollout.template_audit import template_drift
from rollcli.strategies.sampling import SamplingParams

AgentFn = Callable[[Any, dict[str, Any]], float]


class AgentPrograms:
    """A run's agent program, its endpoint (started here, on loopback) and its tasks:
    `train_tasks` / `val_tasks` are the tool env's task arguments (``tasks``,
    ``task_kwargs``), drawn from the training or the validation split."""

    def __init__(
        self,
        agent: str,
        tokenizer: Any,
        train_tasks: dict[str, Any],
        val_tasks: dict[str, Any],
        model: str,
        timeout_s: float,
    ) -> None:
        from rollcli.envs.tools.catalog import load_function
        from rollcli.envs.tools.tasks import TaskSource

        require_agent_extra()
        self.fn = load_function(agent, "agentic.agent")
        self.formats = Formats(tokenizer)
        self.sources = {
            split: TaskSource(kw.get("tasks", "arithmetic"), kw.get("task_kwargs"), split)
            for split, kw in (("train", train_tasks), ("validation", val_tasks))
        }
        self.model, self.timeout_s = model, timeout_s
        self.server = EndpointServer()
        self.server.start()

    def play(
        self,
        policy: ModelPolicy,
        specs: Sequence[EpisodeSpec],
        validation: bool,
        limits: Limits,
        on_progress: ProgressFn | None = None,
    ) -> tuple[list[Episode], dict[str, float]]:
        source = self.sources["validation" if validation else "train"]
        tasks = [(spec, task_dict(source.task(spec.seed), spec.seed)) for spec in specs]
        episodes, stats = play_agent_episodes(
            self.server,
            policy,
            self.fn,
            tasks,
            self.formats,
            limits,
            self.model,
            self.timeout_s,
            on_progress,
        )
        if not validation:  # validation's stats are not logged: its refusals count here next
            stats["agentic/endpoint_refused"] = float(self.server.take_refused())
        return episodes, stats


def endpoint_env(client: Any) -> dict[str, str]:
    """This process's environment plus the episode's endpoint for `client` (the one roll gave
    the program): for a program that runs the episode in another process, e.g.
    ``subprocess.run([...], env=endpoint_env(client))``; an OpenAI SDK there finds the URL
    and key in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, and ``ROLL_AGENT_BASE_URL`` /
    ``ROLL_AGENT_API_KEY`` hold the same for a program that keeps its own OpenAI key."""
    url, key = str(client.base_url).rstrip("/"), client.api_key
    return {
        **os.environ,
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": key,
        "ROLL_AGENT_BASE_URL": url,
        "ROLL_AGENT_API_KEY": key,
    }


def task_dict(task: Any, seed: int) -> dict[str, Any]:
    """What a program is given: the task's prompt and answer, and the episode's seed."""
    return {"prompt": task.prompt, "answer": task.answer, "seed": seed}


def play_agent_episodes(
    server: EndpointServer,
    policy: ModelPolicy,
    agent: AgentFn,
    tasks: Sequence[tuple[EpisodeSpec, dict[str, Any]]],
    formats: Formats,
    limits: Limits,
    model: str,
    timeout_s: float,
    on_progress: ProgressFn | None = None,
) -> tuple[list[Episode], dict[str, float]]:
    """Run `agent` once per task, each in its own thread, against the endpoint; returns the
    episodes (in `tasks` order) and counters: generation rounds and their mean size,
    requests refused, programs timed out, and `agentic/template_drift` and
    `agentic/retokenize_drift` (`rollcli.rollout.template_audit`)."""
    import openai

    params: SamplingParams = policy.params
    tag = policy.tag
    convs = {spec.index: AgentConversation(Episode(spec), formats, limits) for spec, _ in tasks}
    gate = RoundGate(policy, list(convs), timeout_s)
    step = StepEpisodes(convs, gate, params, model)
    server.open(tag, step)
    outcomes: dict[int, tuple[float, str | None]] = {}
    lock = threading.Lock()

    def run(spec: EpisodeSpec, task: dict[str, Any]) -> None:
        client = openai.OpenAI(
            base_url=server.base_url(tag, spec.index),
            api_key=server.api_key,  # the run's key: the endpoint refuses any other
            max_retries=0,
            timeout=timeout_s + 600.0,  # a request waits for its round
        )
        outcome: tuple[float, str | None]
        try:
            outcome = (_reward(agent(client, dict(task))), None)
        except Exception as exc:  # the program's failure is its episode's, not the run's
            outcome = (0.0, f"{type(exc).__name__}: {exc}"[:500])
        finally:
            client.close()
        with lock:
            outcomes[spec.index] = outcome
            if on_progress is not None:
                on_progress(len(outcomes), len(tasks))
        gate.leave(spec.index)

    rounds = threading.Thread(target=gate.run, name="agent-rounds", daemon=True)
    rounds.start()
    threads = [
        threading.Thread(target=run, args=(spec, task), name=f"agent-{spec.index}", daemon=True)
        for spec, task in tasks
    ]
    for t in threads:
        t.start()
    rounds.join()  # every program returned or timed out (or the engine failed)
    server.close(tag)
    for spec, _ in tasks:
        conv = convs[spec.index]
        if spec.index in gate.timed_out:
            conv.finish(0.0, f"the agent program ran past agentic.agent_timeout_s = {timeout_s}")
            continue
        reward, error = outcomes.get(spec.index, (0.0, "the agent program did not finish"))
        if error is not None and conv.episode.end in ("max_turns", "context"):
            error = None  # cut by a limit: refused, as expected, and scored 0
        conv.finish(reward, error)
        if not conv.episode.turn_spans and conv.episode.error is None:
            conv.episode.error = "the agent program returned without asking for a reply"
        gate.end(conv.episode)
    policy.close()
    if gate.failure is not None:
        raise gate.failure
    stats = {
        **template_drift((c.episode, c.fmt) for c in convs.values() if c.fmt is not None),
        "gen_calls": float(gate.rounds),
        "gen_batch_mean": gate.rows / max(gate.rounds, 1),
        "agent_requests_refused": float(step.rejected),
        "agent_timeouts": float(len(gate.timed_out)),
    }
    return [convs[spec.index].episode for spec, _ in tasks], stats


def _reward(value: Any) -> float:
    if isinstance(value, (int, float)):  # bool is an int
        reward = float(value)
        if math.isfinite(reward):
            return reward
    raise TypeError(
        f"the agent program returned {value!r}; it returns the episode's reward, a finite number"
    )
