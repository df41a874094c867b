"""Tools: schemas derived from real functions, argument checks, the built-in calculator and
python tools, and loading tools by name or as ``package.module:function``."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rollcli.envs.tools.calculator import calculator
from rollcli.envs.tools.catalog import load_tools
from rollcli.envs.tools.tool import Tool, ToolDefinitionError
from rollcli.rewards.sandbox import detect_isolation

needs_sandbox = pytest.mark.skipif(
    not detect_isolation()["strong"], reason="no network+mount namespaces here (docs/sandbox.md)"
)


def book_flight(origin: str, destination: str, passengers: int, budget: float | None = None,
                cabin: str = "economy", stops: list[str] | None = None) -> dict:  # fmt: skip
    """Book the cheapest flight that fits.

    Args:
        origin: the airport code to leave from
        destination: the airport code to arrive at
        passengers: how many people fly
        budget: the most to pay in total, in euros
        cabin: the cabin class (choices: ["economy", "business"])
        stops: airports the flight may stop at
    """
    return {"origin": origin, "destination": destination, "passengers": passengers}


def test_the_calculator_schema_is_derived_from_its_hints_and_docstring() -> None:
    assert Tool.from_function(calculator).schema == {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression and return its value.",
            "parameters": {
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": 'numbers with + - * / // % ** and parentheses, e.g. "(347 * 829) + 15"',
                    }
                },
                "required": ["expression"],
            },
            "return": {"type": "string"},
        },
    }


@needs_sandbox
def test_the_python_tool_schema() -> None:
    (tool,) = load_tools(["python"], timeout_s=2.0)
    assert tool.schema["function"] == {
        "name": "python",
        "description": "Run a Python program and return what it prints. Each call starts afresh.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "a complete Python program; print() the values you want to see",
                }
            },
            "required": ["code"],
        },
        "return": {"type": "string"},
    }


def test_a_user_function_with_several_typed_arguments() -> None:
    tool = Tool.from_function(book_flight)
    assert tool.name == "book_flight" and not tool.bounded
    assert tool.schema["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "origin": {"type": "string", "description": "the airport code to leave from"},
            "destination": {"type": "string", "description": "the airport code to arrive at"},
            "passengers": {"type": "integer", "description": "how many people fly"},
            "budget": {
                "type": "number",
                "nullable": True,
                "description": "the most to pay in total, in euros",
            },
            "cabin": {
                "type": "string",
                "enum": ["economy", "business"],
                "description": "the cabin class",
            },
            "stops": {
                "type": "array",
                "items": {"type": "string"},
                "nullable": True,
                "description": "airports the flight may stop at",
            },
        },
        "required": ["origin", "destination", "passengers"],
    }


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"origin": "AMS", "destination": "LIS", "passengers": 2}, None),
        ({"origin": "AMS", "destination": "LIS", "passengers": 2, "budget": None}, None),
        ({"origin": "AMS", "destination": "LIS", "passengers": 2, "budget": 300}, None),
        ({"origin": "AMS", "passengers": 2}, "'destination' is a required property"),
        (
            {"origin": "AMS", "destination": "LIS", "passengers": 2, "seat": "12A"},
            "unexpected argument 'seat'",
        ),
        (
            {"origin": "AMS", "destination": "LIS", "passengers": "two"},
            "argument 'passengers': 'two' is not of type 'integer'",
        ),
        (
            {"origin": "AMS", "destination": "LIS", "passengers": 1, "cabin": "first"},
            "argument 'cabin': 'first' is not one of ['economy', 'business']",
        ),
        (
            {"origin": "AMS", "destination": "LIS", "passengers": 1, "stops": "FRA"},
            "argument 'stops': 'FRA' is not of type 'array', 'null'",
        ),
        (["AMS", "LIS", 2], "arguments must be a JSON object, got list"),
    ],
)
def test_arguments_are_checked_against_the_schema(arguments, problem) -> None:
    assert Tool.from_function(book_flight).check_arguments(arguments) == problem


def test_a_function_without_hints_or_docstring_is_refused_in_one_line() -> None:
    def no_hints(x):
        """Do it.

        Args:
            x: the thing
        """

    def no_docstring(x: int) -> int:
        return x

    def no_arg_line(x: int) -> int:
        """Do it."""
        return x

    for fn, why in [
        (no_hints, "missing a type hint"),
        (no_docstring, "has no docstring"),
        (no_arg_line, "no description for the argument 'x'"),
    ]:
        with pytest.raises(ToolDefinitionError) as err:
            Tool.from_function(fn)
        message = str(err.value)
        assert "\n" not in message and why in message and fn.__name__ in message


def test_an_unbounded_tool_past_its_deadline_times_out() -> None:
    def slow(seconds: float) -> str:
        """Sleep.

        Args:
            seconds: how long
        """
        time.sleep(seconds)
        return "awake"

    tool = Tool.from_function(slow)
    assert tool.call({"seconds": 0.0}, timeout_s=1.0) == "awake"
    start = time.perf_counter()
    with pytest.raises(TimeoutError, match="0.1 s limit"):
        tool.call({"seconds": 2.0}, timeout_s=0.1)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("expression", "value"),
    [("347 * 829", "287663"), ("(12 + 3) * 4 - 7 / 2", "56.5"), ("2^10 ÷ 8", "128"),
     ("254 × 504 − 766", "127250"), ("-2 ** 2", "-4"), ("1 / 3", "0.333333333333"),
     ("7 // 2 + 7 % 2", "4")],
)  # fmt: skip
def test_calculator_arithmetic(expression: str, value: str) -> None:
    assert calculator(expression) == value


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('ls')", "not a call"),
        ("open('/etc/passwd').read()", "not a call"),
        ("x + 1", "not a name"),
        ("(1).__class__", "not an attribute"),
        ("'a' * 3", "not a non-number constant"),
        ("[1, 2]", "not List syntax"),
        ("lambda: 1", "not Lambda syntax"),
        ("import os", "is not an arithmetic expression"),
        ("9 ** 9 ** 9", "more than 100 digits"),
        ("10 ** 50 * 10 ** 50", "more than 100 digits"),
        ("1e308 * 10", "more than 100 digits"),
        ("1 / 0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("1" * 600, "longer than 500 characters"),
    ],
)
def test_calculator_refuses_code_and_huge_results(expression: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        calculator(expression)


def test_tools_load_by_name_and_as_package_module_function(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "shop_tools_for_test.py").write_text(
        "def price(item: str, quantity: int = 1) -> float:\n"
        '    """The price of some items.\n\n    Args:\n        item: what to buy\n'
        '        quantity: how many\n    """\n'
        "    return {'apple': 0.5}[item] * quantity\n"
        "NOT_A_FUNCTION = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = load_tools(["calculator", "shop_tools_for_test:price"], timeout_s=1.0)
    assert [t.name for t in tools] == ["calculator", "price"]
    assert tools[1].call({"item": "apple", "quantity": 4}, timeout_s=1.0) == 2.0
    for refs, message in [
        (["calculater"], "unknown tool 'calculater' (did you mean 'calculator'?)"),
        (["no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
        (
            ["shop_tools_for_test:NOT_A_FUNCTION"],
            "'shop_tools_for_test:NOT_A_FUNCTION' is not a function",
        ),
        (["calculator", "calculator"], "two tools are named 'calculator'"),
        ("calculator", "a non-empty list of tool names"),
        ([], "a non-empty list of tool names"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            load_tools(refs, timeout_s=1.0)
