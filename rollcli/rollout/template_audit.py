"""Template drift: does the chat template reproduce the tokens an episode was built from?

roll builds every multi-turn episode token by token (`chat_turns`, and the agent endpoint's
`agent_conversation`): the model is prompted with, and trained on, the ids it sampled, and
everything between two replies is rendered once from the chat template and appended. The
audit checks, for each reply after an episode's first, the context the model was prompted
with against the template's rendering of the transcript up to that reply, two ways:

- `agentic/template_drift`: the transcript rendered with each earlier reply kept as its
  sampled ids (the template renders everything else: system prompt, tool declarations,
  observations, turn markers). It differs when the template rewrites a turn (trims or
  drops a reply, reformats a message) or renders the conversation otherwise than roll's
  turn-by-turn pieces: the model would then see another context when deployed than it was
  trained in. roll's own episodes read 0 with a template that renders conversations
  as prefixes of their continuations; `agentic.max_template_drift` stops a run above a
  threshold.
- `agentic/retokenize_drift`: the transcript rendered as text and tokenized, as a pipeline
  that re-renders each request does (most OpenAI-style proxies). On top of the above, a
  sampled reply whose text tokenizes to other ids drifts (common at temperature 1): the
  fraction of turns such a pipeline would have trained off-policy on. roll trains on the
  sampled ids either way; the number is what re-rendering would have cost on this model
  and task.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode

_SEP = "\u2063"  # invisible separator: no template rewrites it
_REPLY = _SEP + "REPLY{}" + _SEP  # stands for an earlier reply while the template renders


def audited_turns(
    episode: Episode, fmt: TurnFormat
) -> list[tuple[list[int], list[int] | None, list[int]]]:
    """(re-rendered as text, re-rendered with replies as sampled ids or None where the
    template rewrites a reply, the context the model was prompted with) for every reply
    after the first."""
    assistant = [i for i, m in enumerate(episode.messages) if m["role"] == "assistant"]
    audited = []
    for k, (start, _) in enumerate(episode.turn_spans):
        if 0 < k < len(assistant):
            transcript = episode.messages[: assistant[k]]
            text = fmt.render_prompt(transcript)
            context = episode.prompt_ids + episode.response_ids[:start]
            rendered = fmt.encode(text + fmt.reply_prefix)  # as fmt.prompt(transcript)
            audited.append((rendered, _framed(episode, fmt, transcript, text), context))
    return audited


def _framed(
    episode: Episode, fmt: TurnFormat, transcript: list[dict[str, Any]], text: str
) -> list[int] | None:
    """The transcript's rendering (`text`) with every reply's text replaced by the ids
    sampled for it; None when the template does not render each reply's text as it is."""
    replies = [i for i, m in enumerate(transcript) if m["role"] == "assistant"]
    marked = [dict(m) for m in transcript]
    for j, i in enumerate(replies):
        marked[i]["content"] = _REPLY.format(j)
    pieces = fmt.render_prompt(marked).split(_SEP)  # text, REPLY0, text, REPLY1, ..., text
    if pieces[1::2] != [_REPLY.format(j).strip(_SEP) for j in range(len(replies))]:
        return None  # the template drops or reorders replies
    texts = [transcript[i]["content"] for i in replies]
    filled = "".join(p if n % 2 == 0 else texts[n // 2] for n, p in enumerate(pieces))
    if filled != text:
        return None  # the template rewrites a reply (trims it, drops a part of it)
    if not all(t.startswith(fmt.reply_prefix) for t in texts):
        return None
    eos, eos_id = fmt.tokenizer.eos_token or "", fmt.tokenizer.eos_token_id
    ids: list[int] = []
    before = pieces[0]  # what the template renders before the next reply
    for j in range(len(replies)):
        start, end = episode.turn_spans[j]
        sampled = episode.response_ids[start:end]
        ids += fmt.encode(before + fmt.reply_prefix) + sampled
        before = pieces[2 * j + 2]
        if eos and sampled and sampled[-1] == eos_id and before.startswith(eos):
            before = before[len(eos) :]  # the sampled EOS is the template's end of turn
    return ids + fmt.encode(before + fmt.reply_prefix)


def drifted_turns(episode: Episode, fmt: TurnFormat) -> tuple[int, int, int]:
    """(turns the template renders otherwise, turns re-rendering as text would change,
    turns audited): every reply after the first."""
    audited = audited_turns(episode, fmt)
    framed = sum(f != context for _, f, context in audited)
    text = sum(t != context for t, _, context in audited)
    return framed, text, len(audited)


def template_drift(pairs: Iterable[tuple[Episode, TurnFormat]]) -> dict[str, float]:
    """`agentic/template_drift` and `agentic/retokenize_drift` over episodes (each with the
    turn format it was built with), and the count of drifting turns; nothing when no
    episode had a second reply."""
    framed = text = audited = 0
    for episode, fmt in pairs:
        f, t, n = drifted_turns(episode, fmt)
        framed, text, audited = framed + f, text + t, audited + n
    if not audited:
        return {}
    return {
        "agentic/template_drift": framed / audited,
        "agentic/template_drift_turns": float(framed),
        "agentic/retokenize_drift": text / audited,
    }
