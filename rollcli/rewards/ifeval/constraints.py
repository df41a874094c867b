"""IFEval-style instruction constraints, each a small pure function `(response, **args) -> bool`.

Modelled on the verifiable instructions of IFEval (Zhou et al. 2023, "Instruction-Following
Evaluation for Large Language Models"), with plain definitions:
- a *word* is a run of letters, digits, apostrophes or hyphens (`don't`, `state-of-the-art`);
- a *sentence* ends with `.`, `!` or `?` followed by a space or the end (a final fragment
  without one also counts);
- a *paragraph* is a block of text between blank lines;
- a *bullet* is a line starting with `* ` or `- `.

`min` / `max` bounds are inclusive; a bound left out is not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’\-][A-Za-z0-9]+)*")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")


def _within(n: int, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    return (min is None or n >= min) and (max is None or n <= max)


def words(text: str) -> list[str]:
    """Example:

    >>> words("Don't stop -- state-of-the-art, 3 times!")
    ["Don't", 'stop', 'state-of-the-art', '3', 'times']
    """
    return _WORD.findall(text)


def sentences(text: str) -> list[str]:
    """Example:

    >>> sentences("Hi there. How are you? Fine!  And a fragment")
    ['Hi there.', 'How are you?', 'Fine!', 'And a fragment']
    """
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append(text[start : m.end()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if words(s)]


def paragraphs(text: str) -> list[str]:
    """Example:

    >>> len(paragraphs("one\\n\\ntwo\\n  \\nthree"))
    3
    """
    return [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def word_count(response: str, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    """Example:

    >>> word_count("one two three", min=3), word_count("one two three", max=2)
    (True, False)
    """
    return _within(len(words(response)), min, max)


def sentence_count(response: str, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    """Example:

    >>> sentence_count("A. B. C.", min=3, max=3)
    True
    """
    return _within(len(sentences(response)), min, max)


def paragraph_count(response: str, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    """Example:

    >>> paragraph_count("a\\n\\nb", min=2, max=2), paragraph_count("a b", min=2)
    (True, False)
    """
    return _within(len(paragraphs(response)), min, max)


def include_keywords(response: str, keywords: list[str]) -> bool:
    """Every keyword appears as a whole word or phrase, in any case.

    >>> include_keywords("The Cat sat.", ["cat", "sat"]), include_keywords("concatenate", ["cat"])
    (True, False)
    """
    return all(re.search(rf"\b{re.escape(k)}\b", response, re.I) for k in keywords)


def exclude_keywords(response: str, keywords: list[str]) -> bool:
    """No keyword appears as a whole word or phrase, in any case.

    >>> exclude_keywords("a dog", ["cat"]), exclude_keywords("A CAT", ["cat"])
    (True, False)
    """
    return not any(re.search(rf"\b{re.escape(k)}\b", response, re.I) for k in keywords)


def keyword_frequency(
    response: str,
    keyword: str,
    min: int | None = None,  # noqa: A002
    max: int | None = None,  # noqa: A002
) -> bool:
    """Example:

    >>> keyword_frequency("cat, Cat and a cat", "cat", min=3)
    True
    """
    return _within(len(re.findall(rf"\b{re.escape(keyword)}\b", response, re.I)), min, max)


def letter_frequency(
    response: str,
    letter: str,
    min: int | None = None,  # noqa: A002
    max: int | None = None,  # noqa: A002
) -> bool:
    """Occurrences of one letter, in any case.

    >>> letter_frequency("Banana", "a", min=3, max=3), letter_frequency("Banana", "b", min=2)
    (True, False)
    """
    return _within(response.lower().count(letter.lower()), min, max)


def json_format(response: str) -> bool:
    """The whole response is JSON (a ```json fence around it is allowed).

    >>> json_format('{"a": 1}'), json_format('```json\\n[1, 2]\\n```'), json_format("a: 1")
    (True, True, False)
    """
    text = response.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*\n?(.*?)\n?```", text, re.S | re.I)
    if fenced:
        text = fenced.group(1)
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def bullet_count(response: str, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    """Example:

    >>> bullet_count("* a\\n* b\\n- c\\nnot", min=3, max=3)
    True
    """
    n = len(re.findall(r"^\s*[*-]\s+\S", response, re.M))
    return _within(n, min, max)


def title(response: str) -> bool:
    """A title wrapped in double angular brackets, such as <<my title>>.

    >>> title("<<Spring>>\\nText"), title("<<>> no title"), title("no title")
    (True, False, False)
    """
    return re.search(r"<<[^\n<>]*\S[^\n<>]*>>", response) is not None


def ends_with(response: str, phrase: str) -> bool:
    """Example:

    >>> ends_with("Thanks. Any other questions?  ", "Any other questions?")
    True
    """
    return response.strip().endswith(phrase.strip())


def starts_with(response: str, phrase: str) -> bool:
    """Example:

    >>> starts_with("  Dear team, hi", "Dear team")
    True
    """
    return response.strip().startswith(phrase.strip())


def lowercase(response: str) -> bool:
    """No capital letter anywhere (and at least one letter).

    >>> lowercase("all small here."), lowercase("Not here"), lowercase("123")
    (True, False, False)
    """
    return any(c.isalpha() for c in response) and response == response.lower()


def uppercase(response: str) -> bool:
    """Example:

    >>> uppercase("ALL CAPS!"), uppercase("ALL Caps")
    (True, False)
    """
    return any(c.isalpha() for c in response) and response == response.upper()


def no_commas(response: str) -> bool:
    """Example:

    >>> no_commas("no commas here"), no_commas("one, two")
    (True, False)
    """
    return "," not in response


def placeholder_count(response: str, min: int | None = None, max: int | None = None) -> bool:  # noqa: A002
    """Placeholders in square brackets, such as [address].

    >>> placeholder_count("Send to [name] at [address].", min=2)
    True
    """
    return _within(len(re.findall(r"\[[^\[\]\n]+\]", response)), min, max)


def postscript(response: str, marker: str = "P.S.") -> bool:
    """A postscript at the end, starting on its own line with `marker`.

    >>> postscript("Hello.\\nP.S. bring cake"), postscript("P.S. first line only? no: ok")
    (True, True)
    >>> postscript("Hello, P.S. inline")
    False
    """
    return re.search(rf"(?:^|\n)\s*{re.escape(marker)}", response) is not None


def quotation(response: str) -> bool:
    """The whole response is wrapped in double quotes.

    >>> quotation('"quoted"'), quotation('not "quoted"')
    (True, False)
    """
    text = response.strip()
    return len(text) >= 2 and text[0] == '"' and text[-1] == '"'


CONSTRAINTS: dict[str, Callable[..., bool]] = {
    fn.__name__: fn
    for fn in (
        word_count,
        sentence_count,
        paragraph_count,
        include_keywords,
        exclude_keywords,
        keyword_frequency,
        letter_frequency,
        json_format,
        bullet_count,
        title,
        ends_with,
        starts_with,
        lowercase,
        uppercase,
        no_commas,
        placeholder_count,
        postscript,
        quotation,
    )
}


def check(response: str, constraint: dict[str, Any]) -> bool:
    """Whether `response` satisfies `{"type": name, **args}`; a bad spec raises ValueError."""
    from rollcli.config.errors import did_you_mean

    args = dict(constraint)
    kind = args.pop("type", None)
    if kind not in CONSTRAINTS:
        raise ValueError(
            f"unknown ifeval constraint type {kind!r}{did_you_mean(str(kind), list(CONSTRAINTS))}"
            f" (known: {', '.join(CONSTRAINTS)})"
        )
    try:
        return bool(CONSTRAINTS[kind](response, **args))
    except TypeError as exc:
        raise ValueError(f"ifeval constraint {kind!r}: bad arguments {args} ({exc})") from None
