"""The rlvr-paper's general rewards: RLVR-IFeval's ground_truth through the ifeval checkers,
the general rule (Multi-subject-RLVR without a judge, CrossThink), and the judge when its
endpoint is configured."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from rollcli.rewards.general import general_reward
from rollcli.rewards.ifeval.reward import ifeval_reward
from rollcli.rewards.mix import mix_reward


def _truth(func_name, **args):
    base = {"func_name": func_name, "N": None, "quantifier": None, "keyword_list": None}
    return json.dumps({**base, **args})


def test_rlvr_ifeval_ground_truth_is_checked_by_our_constraints():
    cases = [
        (_truth("validate_lowercase"), "all quiet here", 1.0),
        (_truth("validate_lowercase"), "All quiet", 0.0),
        (_truth("verify_keywords", keyword_list=["owl", "night"]), "An owl at night.", 1.0),
        (_truth("validate_word_constraint", N=3, quantifier="at least"), "one two", 0.0),
        (_truth("validate_word_constraint", N=3, quantifier="at most"), "one two", 1.0),
        (_truth("verify_letter_frequency", letter="a", N=3), "banana", 1.0),
        (
            _truth("validate_end", end_phrase="Is there anything else?"),
            "Hi. Is there anything else?",
            1.0,
        ),
        (_truth("verify_postscript", postscript_marker="P.P.S"), "Hi\nP.P.S bye", 1.0),
    ]
    for truth, response, want in cases:
        result = ifeval_reward(response, truth)
        assert (result["score"], result["ifeval/unchecked"]) == (want, 0.0), truth


def test_an_unchecked_rlvr_ifeval_constraint_scores_zero_and_is_counted():
    result = ifeval_reward("bonjour", _truth("validate_response_language", language="fr"))
    assert result["score"] == 0.0 and result["ifeval/unchecked"] == 1.0
    assert "'validate_response_language' has no checker in roll" in result["error"]


def test_general_rule_matches_free_form_and_option_answers():
    samples = [
        {"response": "It binds. Therefore, the answer is Western Blot.", "answer": "Western blot"},
        {"response": "Therefore, the answer is ELISA.", "answer": "Western blot"},
        {"response": "Looking at the options, the answer is (B).", "answer": "B"},
        {"response": "The answer is A", "answer": "B"},
        {"response": "so \\boxed{\\frac{1}{2}}", "answer": "0.5"},
        {"response": "", "answer": "B"},
    ]
    assert [r["score"] for r in general_reward(samples)] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert {r["judged"] for r in general_reward(samples)} == {0.0}


class _Judge(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"]
        reply = "Score: 10" if "Western blot" in text.split("Answer:")[1] else "Score: 0"
        out = json.dumps({"choices": [{"message": {"content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_general_asks_the_judge_where_an_endpoint_is_configured():
    server = HTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        samples = [
            {"response": "It is a Western blot", "answer": "x", "tag": "llm_judge"},
            {"response": "ELISA", "answer": "x", "tag": "llm_judge"},
            {"response": "The answer is B", "answer": "B", "tag": "crossthinkqa"},
        ]
        results = mix_reward(
            samples,
            routes={"llm_judge": "general", "crossthinkqa": "general"},
            route_options={"llm_judge": {"base_url": url, "model": "judge"}},
        )
    finally:
        server.shutdown()
    assert [r["score"] for r in results] == [1.0, 0.0, 1.0]
    assert [r.get("llm_judge/judged", r.get("crossthinkqa/judged")) for r in results] == [
        1.0,
        1.0,
        0.0,
    ]
