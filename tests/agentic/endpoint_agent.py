"""The agent program of tests/agentic/test_agent_endpoint_cli.py (`agentic.agent =
endpoint_agent:run_episode`): the real `openai` client against roll's endpoint."""


def run_episode(client, task):
    """Two turns; the reward is the replies' length in characters (episodes differ)."""
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
