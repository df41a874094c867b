"""Template drift: would re-rendering an episode's conversation reproduce its tokens?

roll builds every multi-turn episode token by token (`chat_turns`, and the agent endpoint's
`agent_conversation`): the model is prompted with, and trained on, the ids it sampled. A
framework that instead re-renders the conversation with the chat template before each turn
(as most OpenAI-style proxies do) trains on whatever that rendering tokenizes to, which can
differ from what was sampled: a reply's text may not tokenize back to the sampled ids, and
some templates rewrite earlier turns (dropping reasoning, reformatting tool calls). The
audit measures how often that would happen: for each reply after the first, the episode's
transcript up to that reply is rendered with the template and tokenized, and compared with
the ids the model was actually prompted with. `agentic/template_drift` is the fraction of
those turns that differ; `agentic.max_template_drift` stops a run above a threshold.

A nonzero drift is not an error in roll's episodes (they are exact either way): it says how
far a re-rendering pipeline would have trained off-policy on this model and task, and where
a user's own agent code that re-renders would go wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode


def audited_turns(episode: Episode, fmt: TurnFormat) -> list[tuple[list[int], list[int]]]:
    """(the re-rendered prompt, the context the model was prompted with) for every reply
    after the first."""
    assistant = [i for i, m in enumerate(episode.messages) if m["role"] == "assistant"]
    pairs = []
    for k, (start, _) in enumerate(episode.turn_spans):
        if 0 < k < len(assistant):
            context = episode.prompt_ids + episode.response_ids[:start]
            pairs.append((fmt.prompt(episode.messages[: assistant[k]]), context))
    return pairs


def drifted_turns(episode: Episode, fmt: TurnFormat) -> tuple[int, int]:
    """(turns whose re-rendered prompt differs from the sampled context, turns audited):
    every reply after the first."""
    pairs = audited_turns(episode, fmt)
    return sum(rendered != context for rendered, context in pairs), len(pairs)


def template_drift(pairs: Iterable[tuple[Episode, TurnFormat]]) -> dict[str, float]:
    """`agentic/template_drift` over episodes (each with the turn format it was built with),
    and the counts behind it; nothing when no episode had a second reply.

    `agentic/template_drift_text` is the part where the text itself differs (the template
    rewrites a turn); the rest of the drift is tokenization alone: the same text, other ids
    (a sampled reply that does not tokenize back to the ids the model sampled)."""
    drifted = text = audited = 0
    for episode, fmt in pairs:
        for rendered, context in audited_turns(episode, fmt):
            audited += 1
            if rendered != context:
                drifted += 1
                decode = fmt.tokenizer.decode
                text += decode(rendered) != decode(context)
    if not audited:
        return {}
    return {
        "agentic/template_drift": drifted / audited,
        "agentic/template_drift_text": text / audited,
        "agentic/template_drift_turns": float(drifted),
    }
