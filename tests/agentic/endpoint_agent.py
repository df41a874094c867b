"""The agent program of tests/agentic/test_agent_endpoint_cli.py (`agentic.agent =
endpoint_agent:run_episode`): the real `openai` client against roll's endpoint."""

import openai

KEYS_SEEN: set[str] = set()  # the keys roll's clients carried (the test looks for leaks)
INTRUSIONS: list[int] = []  # the HTTP status each request without the run's key got


def run_episode(client, task):
    """Two turns; the reward is the replies' length in characters (episodes differ)."""
    KEYS_SEEN.add(client.api_key)
    if task["seed"] == 1_000_000:  # the first validation episode: first, the old fixed key
        intruder = openai.OpenAI(base_url=str(client.base_url), api_key="roll", max_retries=0)
        try:
            intruder.chat.completions.create(
                model="roll", messages=[{"role": "user", "content": "x"}]
            )
        except openai.AuthenticationError as exc:
            INTRUSIONS.append(exc.status_code)
        finally:
            intruder.close()
    if task["seed"] == 1_000_001:  # the second validation episode (agentic.val_seed + 1)
        raise RuntimeError("a crashing program")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": task["prompt"]},
    ]
    total = 0
    for _ in range(2):
        reply = client.chat.completions.create(model="roll", messages=messages)
        message = reply.choices[0].message
        assert reply.usage.completion_tokens > 0
        total += len(message.content or "")
        messages += [message.model_dump(exclude_none=True), {"role": "user", "content": "And?"}]
    return total / 100
