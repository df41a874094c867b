"""The trusted test harness: the hidden tests run here, in the caller's process, and call
the sandboxed program's functions through proxies.

The program runs alone in its sandbox (:mod:`.runner`); it never receives a test, an
expected result or anything that signs a verdict. Each test snippet is executed here, in a
namespace holding a :class:`Remote` for each function the program defined (and a copy of
each plain value), never a name that shadows a built-in. Calling a ``Remote`` sends the
arguments to the sandbox as plain data and returns the program's result decoded as plain
data, so every comparison (``==``, ``abs(...) < 1e-6``, ``check(candidate)``) runs on trusted
objects. A test passes when it runs to its end without raising.

The tests are trusted code from the dataset: they run unsandboxed, like any reward function.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from .process import Session
from .runner import decode, encode, exception_kind


class ProgramError(Exception):
    """The program's function raised an exception that is not a built-in one."""


class SessionEnded(BaseException):
    """The sandbox ended, ran out of time or broke the protocol during a test.

    A ``BaseException``, so that a test's own ``except Exception`` cannot swallow it.
    """


class Remote:
    """A function of the sandboxed program, called by name over the channel."""

    def __init__(self, channel: Channel, name: str) -> None:
        self._channel, self._name = channel, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._channel.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<sandboxed function {self._name}>"


def _program_exception(kind: str, message: str) -> Exception:
    """A built-in exception of the same name (so ``except ValueError`` in a test works),
    else :class:`ProgramError`."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except TypeError:  # e.g. UnicodeDecodeError needs five arguments
            pass
    return ProgramError(f"{kind}: {message}")


class Channel:
    """Calls into one sandbox session; one request, one reply, in order."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.calls = 0

    def remote(self, name: str) -> Remote:
        return Remote(self, name)

    def _ref(self, value: Any) -> str | None:
        return value._name if isinstance(value, Remote) and value._channel is self else None

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        self.calls += 1
        request = {"id": self.calls, "call": name}
        request["args"] = encode(list(args), self._ref)  # TypeError: the test's own fault
        request["kwargs"] = encode(kwargs, self._ref)
        self.session.send(request)
        line = self.session.receive()
        if line is None:
            raise SessionEnded(f"the program ended or ran out of time during {name}()")
        try:
            reply = json.loads(line)
            if type(reply) is not dict or reply.get("id") != self.calls:
                raise ValueError("reply out of order")
            if "ok" in reply:
                return decode(reply["ok"], self.remote)
            kind, message = reply["raise"]
            if type(kind) is not str or type(message) is not str:
                raise ValueError("malformed exception")
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise SessionEnded(f"malformed reply from the program: {exc}") from None
        raise _program_exception(kind, message)


def _namespace(channel: Channel, names: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__test__"}
    if type(names) is not dict:
        return namespace
    for name, value in names.items():
        if not name.isidentifier() or name.startswith("__") or hasattr(builtins, name):
            continue  # tests always see the real built-ins
        try:
            namespace[name] = decode(value, channel.remote)
        except (ValueError, TypeError, RecursionError):
            continue
    return namespace


def judge(session: Session, names: Any, tests: list[str]) -> list[str | None]:
    """Run each test here against the program in ``session``; its verdict kind (``ok``,
    ``assertion``, ...) per test, ``None`` for each test the session's end cut short."""
    channel = Channel(session)
    namespace = _namespace(channel, names)
    kinds: list[str | None] = []
    for i, test in enumerate(tests):
        try:
            exec(compile(test, f"<test {i}>", "exec"), namespace)
            kinds.append("ok")
        except SessionEnded:
            break
        except Exception as exc:
            kinds.append(exception_kind(exc))
    return kinds + [None] * (len(tests) - len(kinds))
