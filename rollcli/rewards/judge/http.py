"""The `judge` reward: an LLM behind an OpenAI-compatible chat-completions endpoint grades
each response against a rubric.

Options (recipe `reward.options`, or `roll reward judge --option k=v`):
- `base_url` (required): e.g. `http://127.0.0.1:8000/v1`; requests go to
  `{base_url}/chat/completions`.
- `model` (required): the model name the server expects.
- `api_key_env`: the NAME of an environment variable holding the API key (sent as
  `Authorization: Bearer ...`); the key itself never appears in a recipe or a run folder.
- `rubric`: the prompt, with `{prompt}`, `{response}`, `{answer}`, `{reference}`,
  `{max_score}` (see `rubric.fill_rubric`); `max_score` (10) scales the reply to [0, 1].
- `request_timeout_s` (30), `retries` (2: connection errors, timeouts, HTTP 429 and 5xx are
  retried with exponential backoff), `concurrency` (4 requests at once), `max_tokens` (16),
  `temperature` (0).

A request that still fails, or a reply without a score, fails only its sample (score 0,
the reason in `error`).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rollcli.rewards.judge.rubric import DEFAULT_RUBRIC, fill_rubric, parse_score
from rollcli.rewards.registry import reward_options
from rollcli.rewards.runner import batch_reward

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class JudgeRequestError(RuntimeError):
    pass


def chat_completion(
    base_url: str,
    body: dict[str, Any],
    *,
    api_key: str | None,
    timeout_s: float,
    retries: int,
    backoff_s: float = 0.5,
) -> str:
    """POST one chat-completions request and return the first choice's message text."""
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode()
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code} from {url}: {exc.read()[:200].decode('utf-8', 'replace')}"
            if exc.code in RETRY_STATUS:
                continue
            raise JudgeRequestError(last) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"cannot reach {url}: {reason}"
            continue
        except json.JSONDecodeError:
            raise JudgeRequestError(f"{url} did not answer with JSON") from None
        try:
            return str(payload["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            raise JudgeRequestError(
                f"{url} answered without choices[0].message.content: {str(payload)[:200]}"
            ) from None
    raise JudgeRequestError(f"{last} (after {retries + 1} attempts)")


def _api_key(api_key_env: str | None) -> str | None:
    if not api_key_env:
        return None
    key = os.environ.get(api_key_env)
    if not key:
        raise ValueError(
            f"the judge's api_key_env names {api_key_env!r}, but that environment variable is "
            "not set (export it before starting the run)"
        )
    return key


@reward_options(
    "base_url",
    "model",
    "api_key_env",
    "rubric",
    "max_score",
    "request_timeout_s",
    "retries",
    "concurrency",
    "max_tokens",
    "temperature",
)
@batch_reward
def judge_reward(
    samples: list[dict[str, Any]],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    rubric: str = DEFAULT_RUBRIC,
    max_score: float = 10,
    request_timeout_s: float = 30.0,
    retries: int = 2,
    concurrency: int = 4,
    max_tokens: int = 16,
    temperature: float = 0.0,
    **_: Any,
) -> list[dict[str, Any]]:
    """Score each sample with the endpoint's judgement in [0, 1], requests in parallel."""
    if not base_url or not model:
        raise ValueError(
            "the judge reward needs the options base_url (e.g. http://127.0.0.1:8000/v1) and "
            "model; set reward.options.base_url / reward.options.model"
        )
    key = _api_key(api_key_env)

    def one(sample: dict[str, Any]) -> dict[str, Any]:
        try:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": fill_rubric(rubric, sample, max_score)}],
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
            reply = chat_completion(
                base_url, body, api_key=key, timeout_s=request_timeout_s, retries=retries
            )
            return {"score": parse_score(reply, max_score), "judge_reply": reply}
        except (JudgeRequestError, ValueError) as exc:
            return {"score": 0.0, "error": str(exc)}

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, samples))
