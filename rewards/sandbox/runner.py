"""The trusted harness that runs *inside* the sandbox, as ``python -I -B runner.py``.

Standard library only. It reads its secret (a per-run token and the hidden
tests) from fd 3 before any untrusted code runs, closes it, runs ``main.py`` as
``__main__``, then each test snippet in the program's namespace, and writes one
``TOKEN verdict`` line per step to the status pipe on fd 4.

Why tokens: the program shares the process, so it could print fake verdicts or
call ``os._exit(0)`` before the tests run. Each step has its own one-time token,
so a line without the right one is ignored (a token read back from the pipe
after its step is worth nothing), and a missing verdict counts as a failure. A
program that deliberately reads the harness's memory can still cheat; see
docs/sandbox.md.
"""

import builtins
import json
import os
import sys


def _kind(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return "syntax_error"
    if isinstance(exc, AssertionError):
        return "assertion"
    if isinstance(exc, MemoryError):
        return "memory"
    return "runtime_error"


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:500]


def _run(source: str, filename: str, namespace: dict) -> tuple[str, str]:
    """Compile and exec ``source``; return ``(kind, detail)`` with kind ``ok`` on success."""
    try:
        code = compile(source, filename, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        kind = "syntax_error" if isinstance(exc, (SyntaxError, ValueError)) else _kind(exc)
        return kind, _describe(exc)
    try:
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code in (None, 0):
            return "ok", "SystemExit(0)"
        return "runtime_error", f"SystemExit({exc.code!r})"
    except BaseException as exc:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        return _kind(exc), _describe(exc)
    return "ok", ""


def main() -> None:
    with os.fdopen(3, "rb") as f:
        secret = json.loads(f.read())
    tokens, tests = secret["tokens"], secret["tests"]
    del secret

    def report(step: int, kind: str, detail: str) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        line = json.dumps({"kind": kind, "detail": detail})
        os.write(4, f"{tokens[step]} verdict {line}\n".encode())

    with open("main.py", encoding="utf-8") as f:
        source = f.read()
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
    sys.argv = ["main.py"]
    kind, detail = _run(source, "main.py", namespace)
    report(0, kind, detail)
    if kind != "ok":
        code = detail[len("SystemExit(") : -1] if detail.startswith("SystemExit(") else "1"
        os._exit(int(code) if code.isdigit() else 1)
    for i, test in enumerate(tests):
        kind, detail = _run(test, f"<test {i}>", namespace)
        report(i + 1, kind, detail)


if __name__ == "__main__":
    main()
