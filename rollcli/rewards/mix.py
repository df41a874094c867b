"""The `mix` reward: route each sample by its `tag` (its domain) to that domain's reward.

Options: `routes` maps a tag to a reward (a built-in name or `package.module:function`), with
`"*"` as an optional catch-all; `route_options` maps a tag to extra options for its reward.
Every other option (e.g. `format_weight`) goes to every route. Each domain's samples are
scored together through the same runner as a single reward (so the code domain still runs
its programs in parallel, and a crash stays with its sample).

Per-domain metrics: each result carries `<tag>/mean` (its score) and its reward's numeric
keys as `<tag>/<key>`. The rollout averages every key over the samples that have it, so
`reward/<tag>/mean` in `metrics.jsonl` is that domain's mean reward. `correct` stays
unprefixed too, so validation accuracy spans every domain.
"""

from __future__ import annotations

from typing import Any

from rollcli.rewards.registry import load_reward_fn
from rollcli.rewards.runner import batch_reward, score_samples

CATCH_ALL = "*"


def route_for(tag: str, routes: dict[str, str]) -> str:
    if tag in routes:
        return routes[tag]
    if CATCH_ALL in routes:
        return routes[CATCH_ALL]
    raise KeyError(
        f"no reward route for tag {tag!r} (routes: {', '.join(sorted(routes)) or 'none'}); "
        f'add reward.routes.{tag}, or a catch-all "*"'
    )


def _prefixed(tag: str, result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"score": result["score"], "error": result.get("error")}
    out[f"{tag}/mean"] = result["score"]
    if "correct" in result:
        out["correct"] = result["correct"]
    for key, value in result.items():
        if key in ("score", "error"):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{tag}/{key}"] = value
        elif key not in out:
            out[key] = value  # text such as `reason` / `detail` stays readable in the rows
    if out["error"]:
        out["error"] = f"{tag}: {out['error']}"
    return out


@batch_reward
def mix_reward(
    samples: list[dict[str, Any]],
    *,
    routes: dict[str, str] | None = None,
    route_options: dict[str, dict[str, Any]] | None = None,
    timeout_s: float = 10.0,
    **options: Any,
) -> list[dict[str, Any]]:
    """Score each sample with the reward its tag routes to.

    >>> mix_reward([{"response": "2+2 = 4", "answer": "4", "tag": "math"},
    ...             {"response": "hi", "answer": '[{"type": "lowercase"}]', "tag": "chat"}],
    ...            routes={"math": "math", "chat": "ifeval"})[1]["chat/ifeval/lowercase"]
    1.0
    """
    if not routes:
        raise ValueError("the mix reward needs routes: reward.routes maps each tag to a reward")
    route_options = route_options or {}
    by_tag: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        by_tag.setdefault(str(sample.get("tag", "")), []).append(i)
    results: list[dict[str, Any]] = [{} for _ in samples]
    for tag, indices in by_tag.items():
        try:
            ref = route_for(tag, routes)
            fn = load_reward_fn(ref)
        except (KeyError, ValueError) as exc:
            error = str(exc.args[0]) if exc.args else str(exc)
            for i in indices:
                results[i] = {"score": 0.0, "error": f"{tag}: {error}"}
            continue
        opts = {**options, **route_options.get(tag, {})}
        scored = score_samples(fn, [samples[i] for i in indices], opts, timeout_s)
        for i, result in zip(indices, scored, strict=True):
            results[i] = _prefixed(tag, result)
    return results
