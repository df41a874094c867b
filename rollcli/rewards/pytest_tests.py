"""A pytest-style test module (KodCode's `test` column) as the sandbox's test snippets.

KodCode's tests are a pytest file that imports the program as a module named `solution`:

    from solution import add

    def test_add():
        assert add(1, 2) == 3

The sandbox runs the program alone and the tests here, calling its functions through
proxies (`rollcli.rewards.sandbox.harness`). So each `test_*` function (and each
`test_*` method of a `Test*` class) becomes one snippet: the module with its `solution`
imports bound to the program's functions, then that test's call. A test passes when its
call returns; the reward is the fraction of tests that pass.

`@pytest.mark.parametrize` runs a test once per parameter set (one test, passed when every
set passes). A test that
takes a fixture (`capsys`, `tmp_path`) fails as a runtime error: there are no fixtures here,
and that is counted like any failure. `pytest.raises` works where pytest is installed.
"""

from __future__ import annotations

import ast

# Bound once per snippet: the program's functions as the module `solution`, and a runner
# that expands `@pytest.mark.parametrize` (read from the marks pytest stores on a test).
_PRELUDE = """\
import types as _roll_types
if "_roll_solution" not in globals():
    _roll_solution = _roll_types.SimpleNamespace(
        **{_k: _v for _k, _v in dict(globals()).items() if not _k.startswith("_")})
def _roll_call(_test):
    _sets = [{}]
    for _mark in getattr(_test, "pytestmark", []):
        if getattr(_mark, "name", "") != "parametrize":
            continue
        _names, _values = _mark.args[0], _mark.args[1]
        if isinstance(_names, str):
            _names = [n.strip() for n in _names.split(",") if n.strip()]
        _rows = [v if len(_names) > 1 else (v,) for v in _values]
        _rows = [tuple(getattr(v, "values", v)) for v in _rows]
        _sets = [{**s, **dict(zip(_names, r))} for s in _sets for r in _rows]
    for _kwargs in _sets:
        _test(**_kwargs)
"""


class PytestModuleError(ValueError):
    """The test column is not a Python module with at least one test."""


class _BindSolution(ast.NodeTransformer):
    """`from solution import f as g` -> `g = _roll_solution.f`; `import solution as s` ->
    `s = _roll_solution`; `from solution import *` -> nothing (the names are there)."""

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | list[ast.stmt]:
        if node.module != "solution":
            return node
        out: list[ast.stmt] = []
        for alias in node.names:
            if alias.name == "*":
                continue
            out.append(_assign(alias.asname or alias.name, f"_roll_solution.{alias.name}"))
        return out or [ast.Pass()]

    def visit_Import(self, node: ast.Import) -> ast.AST | list[ast.stmt]:
        kept = [a for a in node.names if a.name != "solution"]
        bound = [_assign(a.asname or a.name, "_roll_solution") for a in node.names if a not in kept]
        if not bound:
            return node
        return ([ast.Import(names=kept)] if kept else []) + bound


def _assign(name: str, expr: str) -> ast.stmt:
    return ast.parse(f"{name} = {expr}").body[0]


def calls_of_tests(tree: ast.Module) -> list[str]:
    """The call of each test in the module: `test_x()`, `TestY().test_z()`.

    >>> calls_of_tests(ast.parse("def test_a(): pass\\nclass TestB:\\n    def test_c(self): pass"))
    ['_roll_call(test_a)', '_roll_call(TestB().test_c)']
    """
    calls = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            calls.append(f"_roll_call({node.name})")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    calls.append(f"_roll_call({node.name}().{item.name})")
    return calls


def pytest_snippets(source: str) -> list[str]:
    """One test snippet per test of a pytest module (see the module's docstring).

    >>> snippets = pytest_snippets("from solution import add\\n\\ndef test_add():\\n"
    ...                            "    assert add(1, 2) == 3\\n")
    >>> len(snippets), snippets[0].splitlines()[-2:]
    (1, ['    assert add(1, 2) == 3', '_roll_call(test_add)'])
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise PytestModuleError(
            f"the tests are not a Python module ({exc.msg}, line {exc.lineno})"
        ) from None
    calls = calls_of_tests(tree)
    if not calls:
        raise PytestModuleError(
            "the tests hold no test_* function (a pytest module, as KodCode's `test` column)"
        )
    module = ast.unparse(ast.fix_missing_locations(_BindSolution().visit(tree)))
    return [f"{_PRELUDE}{module}\n{call}\n" for call in calls]
