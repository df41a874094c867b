"""An agent program for the endpoint's resume test (`agentic.agent`): two turns through the
`openai` client; its reward is the replies' length, so a group's episodes differ."""

from __future__ import annotations


def run_episode(client, task) -> float:  # noqa: ANN001
    messages = [{"role": "user", "content": task["prompt"]}]
    total = 0
    for _ in range(2):
        reply = client.chat.completions.create(model="roll", messages=messages)
        message = reply.choices[0].message
        total += len(message.content or "")
        messages += [message.model_dump(exclude_none=True), {"role": "user", "content": "And?"}]
    return total / 100
