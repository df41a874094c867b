"""The untrusted side: runs *inside* the sandbox as ``python -I -B runner.py``, and the
wire format both sides speak.

Standard library only (the file is copied into the sandbox root). It runs ``main.py`` as
``__main__``, writes one line on fd 4 saying how that went and which names the program
defined, then answers calls read from fd 3, one JSON line each, until fd 3 closes:
``{"id", "call": name, "args", "kwargs"}`` → ``{"id", "ok": value}`` or
``{"id", "raise": [type name, message]}``.

This process holds no test, no expected result and nothing that signs a verdict: it only
reports what the program's functions return. The trusted parent (:mod:`.harness`) runs
the tests and decides every verdict, so a program that reads its own interpreter's state
finds nothing worth forging. Values cross as plain data (:func:`encode` / :func:`decode`),
so an object whose ``__eq__`` is always true never reaches the comparison.
"""

import builtins
import json
import os
import sys

MAX_DEPTH = 200


def encode(value, ref=None, depth=0):
    """A JSON-able form of plain data; ``ref(value)`` names a function to pass by name.

    >>> encode((1, {"a": [2.5, None]}, {3}, b"x"))
    {'t': [1, {'d': [['a', [2.5, None]]]}, {'s': [3]}, {'b': '78'}]}
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply to leave the sandbox")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    sub = [depth + 1]

    def each(items):
        return [encode(v, ref, sub[0]) for v in items]

    if isinstance(value, list):
        return each(value)
    if isinstance(value, tuple):
        return {"t": each(value)}
    if isinstance(value, dict):
        return {"d": [each(kv) for kv in value.items()]}
    if isinstance(value, frozenset):
        return {"f": each(value)}
    if isinstance(value, set):
        return {"s": each(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"b": bytes(value).hex()}
    if isinstance(value, complex):
        return {"c": [value.real, value.imag]}
    name = ref(value) if ref is not None else None
    if name is not None:
        return {"r": name}
    raise TypeError(f"a {type(value).__name__} cannot leave the sandbox (only plain data can)")


def decode(data, ref=None):
    """Plain Python values from :func:`encode`'s form; strict, as it reads untrusted input.

    Only ``None``, bool, int, float, str, list, tuple, dict, set, frozenset, bytes and
    complex come out (and what ``ref(name)`` returns for a function passed by name).

    >>> decode({"t": [1, {"d": [["a", [2.5, None]]]}, {"s": [3]}, {"b": "78"}]})
    (1, {'a': [2.5, None]}, {3}, b'x')
    >>> decode({"x": 1})
    Traceback (most recent call last):
    ...
    ValueError: malformed value from the sandbox
    """
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [decode(v, ref) for v in data]
    if kind is dict and len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "b" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "r" and type(body) is str and ref is not None:
            return ref(body)
        if tag == "c" and type(body) is list and len(body) == 2:
            re, im = body
            if type(re) in (int, float) and type(im) in (int, float):
                return complex(re, im)
        if type(body) is list:
            items = [decode(v, ref) for v in body]
            if tag == "t":
                return tuple(items)
            if tag == "s":
                return set(items)
            if tag == "f":
                return frozenset(items)
            if tag == "d" and all(type(kv) is list and len(kv) == 2 for kv in items):
                return {k: v for k, v in items}
    raise ValueError("malformed value from the sandbox")


def exception_kind(exc):
    """The verdict kind of an exception the program or a test raised (the harness's too).

    >>> exception_kind(AssertionError()), exception_kind(KeyError("x"))
    ('assertion', 'runtime_error')
    """
    if isinstance(exc, SyntaxError):
        return "syntax_error"
    if isinstance(exc, AssertionError):
        return "assertion"
    if isinstance(exc, MemoryError):
        return "memory"
    return "runtime_error"


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


def _run_main(source, namespace):
    """Compile and exec the program; ``(kind, detail)`` with kind ``ok`` on success."""
    try:
        code = compile(source, "main.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        kind = "syntax_error" if isinstance(exc, (SyntaxError, ValueError)) else exception_kind(exc)
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
        return exception_kind(exc), _describe(exc)
    return "ok", ""


def _send(message):
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(4, (json.dumps(message) + "\n").encode())


def _names(namespace, ref):
    """The program's top-level functions (by name) and plain values, for the tests."""
    out = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or type(value).__name__ == "module":
            continue
        try:
            out[name] = {"r": name} if callable(value) else encode(value, ref)
        except (TypeError, ValueError, RecursionError):
            continue  # not plain data: the tests cannot use it by name
    return out


def _answer(request, namespace, ref):
    def resolve(name):
        return namespace[name]

    try:
        fn = namespace[request["call"]]
        args = decode(request["args"], resolve)
        kwargs = decode(request["kwargs"], resolve)
        return {"ok": encode(fn(*args, **kwargs), ref)}
    except BaseException as exc:  # the program's exception is the test's to judge
        return {"raise": [type(exc).__name__, str(exc)[:500]]}


def serve(namespace, ref):
    """Answer call requests from fd 3 until it closes."""
    with os.fdopen(3, "rb") as calls:
        for line in calls:
            request = json.loads(line)
            reply = _answer(request, namespace, ref)
            try:
                _send({"id": request["id"], **reply})
            except (TypeError, ValueError, RecursionError) as exc:
                _send({"id": request["id"], "raise": [type(exc).__name__, str(exc)[:500]]})


def main():
    with open("main.py", encoding="utf-8") as f:
        source = f.read()
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
    sys.argv = ["main.py"]
    kind, detail = _run_main(source, namespace)
    index = {id(v): k for k, v in namespace.items() if callable(v)}

    def ref(value):
        return index.get(id(value))

    names = _names(namespace, ref) if kind == "ok" else {}
    _send({"kind": kind, "detail": detail, "names": names})
    if kind != "ok":
        code = detail[len("SystemExit(") : -1] if detail.startswith("SystemExit(") else "1"
        os._exit(int(code) if code.isdigit() else 1)
    serve(namespace, ref)


if __name__ == "__main__":
    main()
