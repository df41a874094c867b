"""The HTTP judge against a real HTTP server on 127.0.0.1 speaking the chat-completions
format. The server is a stand-in for the user's endpoint (OpenAI, vLLM, ...): that API is a
boundary we do not own, so the test checks what we send and how we read the answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rollcli.workers.reward import RewardArgs, RewardWorker


class Judge(BaseHTTPRequestHandler):
    """Replies `Score: N` where N is the response's length; scripted failures by content."""

    requests: list[dict] = []
    fail_first: dict[str, int] = {}

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"]
        Judge.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        answer = text.split("Answer:\n", 1)[1].split("\n", 1)[0]
        if answer == "flaky" and Judge.fail_first.get("flaky", 0) > 0:
            Judge.fail_first["flaky"] -= 1
            return self._send(503, {"error": "overloaded"})
        if answer == "forbidden":
            return self._send(401, {"error": "bad key"})
        reply = "I cannot grade this" if answer == "mute" else f"Score: {len(answer)}"
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": reply}}]})

    def _send(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    Judge.requests = []
    Judge.fail_first = {"flaky": 2}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def judge(base_url, samples, **options):
    opts = {"base_url": base_url, "model": "grader", "retries": 2, **options}
    return RewardWorker(RewardArgs("judge", options=opts, timeout_s=5)).score(samples)


def test_scores_parsed_and_scaled_and_the_request_is_chat_completions(server, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-123")
    samples = [
        {"response": "four", "prompt": "2+2?", "answer": "4"},
        {"response": "a longer one", "prompt": "q"},  # 12 chars > max_score 10: clipped
    ]
    results = judge(server, samples, api_key_env="MY_JUDGE_KEY", concurrency=2)
    assert [r["score"] for r in results] == [0.4, 1.0]
    assert [r["error"] for r in results] == [None, None]
    first = next(r for r in Judge.requests if "four" in r["body"]["messages"][0]["content"])
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer sk-test-123"
    assert first["body"]["model"] == "grader" and first["body"]["temperature"] == 0.0
    content = first["body"]["messages"][0]["content"]
    assert "Question:\n2+2?" in content and "Reference answer:\n4" in content


def test_retries_on_503_then_succeeds(server):
    results = judge(server, [{"response": "flaky"}])
    assert results[0]["score"] == 0.5 and results[0]["error"] is None
    assert len(Judge.requests) == 3  # two 503s, then the answer


def test_failures_stay_with_their_sample(server):
    samples = [{"response": "forbidden"}, {"response": "mute"}, {"response": "ok"}]
    results = judge(server, samples, retries=0)
    assert "HTTP 401" in results[0]["error"]
    assert "no score in the judge's reply" in results[1]["error"]
    assert results[2] == {"score": 0.2, "judge_reply": "Score: 2", "error": None}


def test_unreachable_endpoint_and_custom_rubric(server):
    dead = judge("http://127.0.0.1:9/v1", [{"response": "x"}], retries=1, request_timeout_s=1)
    assert "cannot reach" in dead[0]["error"] and "after 2 attempts" in dead[0]["error"]
    rubric = "Grade 0-{max_score}.\nAnswer:\n{response}\nend"
    out = judge(server, [{"response": "abc"}], rubric=rubric, max_score=5)
    assert out[0]["score"] == pytest.approx(0.6)
    assert Judge.requests[-1]["body"]["messages"][0]["content"].startswith("Grade 0-5.")


def test_missing_settings_are_clear_errors(server, monkeypatch):
    monkeypatch.delenv("UNSET_KEY_VAR", raising=False)
    out = judge(server, [{"response": "x"}], api_key_env="UNSET_KEY_VAR")
    assert "UNSET_KEY_VAR" in out[0]["error"] and "not set" in out[0]["error"]
    out = RewardWorker(RewardArgs("judge", options={})).score([{"response": "x"}])
    assert "base_url" in out[0]["error"]
