"""A program that inspects its own interpreter must not be able to forge a verdict.

Each program here is wrong (or solves nothing) and tries to earn reward by reading the
harness's state. On the old in-process harness, where the tests, the per-step tokens and
the verdict writer lived in the program's interpreter, each earned full reward.
"""

from __future__ import annotations

from rollcli.rewards.sandbox import run_humaneval, run_tests

# Walks the stack to the harness's frame and calls its verdict writer for every step.
FRAME_FORGER = """
import os, sys
f = sys._getframe()
while f is not None and "report" not in f.f_locals:
    f = f.f_back
report, tokens = f.f_locals["report"], f.f_locals["tokens"]
for step in range(len(tokens)):
    report(step, "ok", "")
os._exit(0)
"""

# Finds the token list through the garbage collector and signs "ok" lines itself.
GC_FORGER = """
import gc, os, json
for obj in gc.get_objects():
    if isinstance(obj, dict) and "tokens" in obj and "tests" in obj:
        for token in obj["tokens"]:
            os.write(4, (token + ' verdict {"kind": "ok", "detail": ""}\\n').encode())
for obj in gc.get_objects():
    if isinstance(obj, list) and obj and all(isinstance(t, str) and len(t) == 32 for t in obj):
        for token in obj:
            os.write(4, (token + ' verdict {"kind": "ok", "detail": ""}\\n').encode())
os._exit(0)
"""

# Reports whether any object it can reach holds the hidden test text.
TEST_READER = """
import gc, sys

PARTS = ["MA", "RK-7q"]  # the marker is never whole in this program's own memory

def _marked(s):
    return isinstance(s, str) and "".join(PARTS) in s

def seen():
    objs = gc.get_objects()
    f = sys._getframe()
    while f is not None:
        objs.extend(f.f_locals.values())
        objs.extend(f.f_globals.values())
        f = f.f_back
    for obj in objs:
        for ref in [obj, *gc.get_referents(obj)]:
            if _marked(ref):
                return True
    return False

SEEN = seen()

def leaked():
    return SEEN
"""


EQ_CHEAT = """
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False

def add(a, b):
    return Anything()
"""


def test_frame_walking_program_cannot_sign_verdicts():
    r = run_tests(FRAME_FORGER, ["assert solve() == 42", "assert solve() == 43"])
    assert (r.passed, r.reward) == (0, 0.0)


def test_gc_walking_program_cannot_sign_verdicts():
    r = run_tests(GC_FORGER, ["assert solve() == 42"])
    assert (r.passed, r.reward) == (0, 0.0)


def test_forger_earns_nothing_on_humaneval():
    test = "def check(candidate):\n    assert candidate(1) == 2\n"
    prompt = "def inc(x):\n    '''Add one.'''\n"
    assert run_humaneval(prompt, "    return x\n" + FRAME_FORGER, test, "inc").reward == 0.0


def test_program_never_holds_the_hidden_tests():
    # the marker is in the test's text; the program looks for it everywhere it can reach
    r = run_tests(TEST_READER, ['assert leaked() is False, "MARK-7q"'])
    assert r.verdicts == ("ok",), r


def test_object_equal_to_everything_does_not_pass():
    r = run_tests(EQ_CHEAT, ["assert add(1, 2) == 3", "assert not (add(1, 2) != 3)"])
    assert r.reward == 0.0
