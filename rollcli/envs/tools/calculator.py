"""The built-in `calculator` tool: arithmetic on numbers, nothing else.

The expression is parsed with Python's own parser (`ast`) and only a whitelist of nodes is
evaluated: numbers, parentheses, unary + and -, and + - * / // % **. A name, a call, an
attribute, a string or anything else is refused before any of it runs, so no text a model
writes can reach `eval`. Powers whose result would pass `MAX_DIGITS` digits and results
that large are refused too, so ``9**9**9`` cannot pin a CPU or fill memory. ``×``, ``÷``,
``−`` and ``^`` (a power, as on a calculator) are read as ``*``, ``/``, ``-`` and ``**``.

Examples:
    >>> calculator("347 * 829")
    '287663'
    >>> calculator("(12 + 3) * 4 - 7 / 2")
    '56.5'
    >>> calculator("2^10 ÷ 8")
    '128'
    >>> calculator("__import__('os').getcwd()")
    Traceback (most recent call last):
    ...
    ValueError: only numbers, parentheses and + - * / // % ** are allowed, not a call
    >>> calculator("9**9**9")
    Traceback (most recent call last):
    ...
    ValueError: the result would have more than 100 digits
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import cast

MAX_DIGITS = 100  # results (and powers) larger than 10**MAX_DIGITS are refused
MAX_CHARS = 500  # longer expressions are refused before parsing

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SIGNS = {"×": "*", "÷": "/", "−": "-", "^": "**"}  # a calculator's signs, as Python writes them
_UNARY: dict[type, Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_ALLOWED = "only numbers, parentheses and + - * / // % ** are allowed"


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(347 * 829) + 15"
    """
    if len(expression) > MAX_CHARS:
        raise ValueError(f"the expression is longer than {MAX_CHARS} characters")
    text = expression.strip()
    for sign, python in _SIGNS.items():
        text = text.replace(sign, python)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression!r} is not an arithmetic expression") from None
    return _format(_evaluate(tree.body))


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return cast(float, node.value)  # an int stays an int: products are exact
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError(f"the result would have more than {MAX_DIGITS} digits") from None
        if isinstance(value, complex):
            raise ValueError("the result is not a real number")
        if abs(value) >= 10**MAX_DIGITS:
            raise ValueError(f"the result would have more than {MAX_DIGITS} digits")
        return value
    raise ValueError(f"{_ALLOWED}, not {_describe(node)}")


def _check_power(base: float, exponent: float) -> None:
    """Refuse a power whose result would pass `MAX_DIGITS` digits, before computing it."""
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > MAX_DIGITS:
        raise ValueError(f"the result would have more than {MAX_DIGITS} digits")


def _format(value: float) -> str:
    """Integers exactly; a float with 12 significant digits (a whole float as an integer)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Call: "a call",
        ast.Name: "a name",
        ast.Attribute: "an attribute",
        ast.Constant: "a non-number constant",
        ast.Compare: "a comparison",
        ast.BoolOp: "a boolean operator",
    }
    return kinds.get(type(node), f"{type(node).__name__} syntax")
