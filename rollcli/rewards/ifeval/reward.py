"""The `ifeval` reward: the fraction of a sample's instruction constraints its response meets.

A sample lists its constraints in a `constraints` field, or in `answer` as JSON
(`{"constraints": [...]}` or the bare list), each `{"type": name, **args}` with a name from
`rollcli.rewards.ifeval.constraints.CONSTRAINTS`. Besides `score`, the result has `correct`
(1 when every constraint holds) and one 0/1 metric per constraint type, `ifeval/<type>`.

An `answer` that is allenai/RLVR-IFeval's `ground_truth` (JSON naming a `func_name`,
`data.answer_key: ground_truth`) is mapped to these constraints (`.allenai`); such a row
also has `ifeval/unchecked` (1 for a function with no checker here, scored 0 with the reason
in `error`), so the share of unchecked rows is a metric, never a silent score.
"""

from __future__ import annotations

import json
from typing import Any

from rollcli.rewards.ifeval import allenai
from rollcli.rewards.ifeval.constraints import check
from rollcli.rewards.registry import reward_options


def constraints_of(answer: Any, constraints: Any = None) -> list[dict[str, Any]]:
    """The sample's constraint list, from the field or the JSON `answer`."""
    spec = constraints
    if spec is None and allenai.is_ground_truth(allenai.parse(answer)):
        return allenai.constraints(allenai.parse(answer))
    if spec is None:
        if not answer:
            raise ValueError(
                "the ifeval reward needs 'constraints', or 'answer' holding them as JSON"
            )
        try:
            spec = json.loads(answer) if isinstance(answer, str) else answer
        except json.JSONDecodeError:
            raise ValueError(
                f"'answer' is not JSON with constraints: {str(answer)[:80]!r}"
            ) from None
    if isinstance(spec, dict):
        spec = spec.get("constraints")
    if not isinstance(spec, list) or not spec or not all(isinstance(c, dict) for c in spec):
        raise ValueError("constraints must be a non-empty list of {'type': ..., ...} objects")
    return spec


@reward_options()
def ifeval_reward(
    response: str, answer: Any = "", *, constraints: Any = None, **_: Any
) -> dict[str, Any]:
    """Fraction of constraints satisfied.

    >>> ifeval_reward("hello world", constraints=[{"type": "lowercase"}, {"type": "word_count", "min": 3}])
    {'score': 0.5, 'correct': 0.0, 'ifeval/lowercase': 1.0, 'ifeval/word_count': 0.0}
    >>> ifeval_reward("<<T>> ok", '{"constraints": [{"type": "title"}]}')["score"]
    1.0
    """
    allenai_row = constraints is None and allenai.is_ground_truth(allenai.parse(answer))
    try:
        spec = constraints_of(answer, constraints)
    except allenai.UncheckedConstraint as exc:
        return {"score": 0.0, "correct": 0.0, "ifeval/unchecked": 1.0, "error": str(exc)}
    met: dict[str, list[float]] = {"ifeval/unchecked": []} if allenai_row else {}
    for c in spec:
        met.setdefault(f"ifeval/{c.get('type')}", []).append(float(check(response, c)))
    flat = [v for vs in met.values() for v in vs]
    score = sum(flat) / len(flat)
    return {
        "score": score,
        "correct": float(all(flat)),
        **{k: sum(vs) / len(vs) if vs else 0.0 for k, vs in met.items()},
    }
