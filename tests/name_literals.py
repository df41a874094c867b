"""An AST scan of rollcli/ for names compared as string literals: a role, a rollout source,
a policy loss or a precision written out (`role == "actor_train"`, `spec.rollout in
("prompts", "episodes")`, `case "bf16":`) instead of read from the table that holds it.

`python tests/name_literals.py` prints every such comparison, their count by file, and
the count of every comparison of an attribute with a string literal (`x.attr == "lit"`,
whatever the literal), the wider habit the name tables replace.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rollcli"
# each kind of name, the module holding its table (the only place it may be compared), and
# its names
TABLES: dict[str, tuple[str, frozenset[str]]] = {
    "role": (
        "config/roles.py",
        frozenset(
            ("actor_train", "actor_infer", "reference", "critic", "teacher", "reward")
            + ("env", "env_val", "env_cross")
        ),
    ),
    "rollout source": ("config/pipeline_spec.py", frozenset(("prompts", "episodes", "data"))),
    "policy loss": ("config/loss_spec.py", frozenset(("ppo", "gspo", "topr", "pg", "raftpp"))),
    "precision": (
        "config/precision_spec.py",
        frozenset(("fp32", "bf16", "bf16-mixed", "int8", "fp8")),
    ),
}
COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def literals(node: ast.AST) -> list[ast.Constant]:
    """The string constants an operand is or holds (`"hf"`, `("hf", "auto")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _pattern_literals(pattern: ast.pattern) -> list[ast.Constant]:
    if isinstance(pattern, ast.MatchValue):
        return literals(pattern.value)
    if isinstance(pattern, ast.MatchOr):
        return [c for p in pattern.patterns for c in _pattern_literals(p)]
    return []


def _kinds(values: list[str]) -> set[str]:
    return {kind for kind, (_, names) in TABLES.items() for v in values if v in names}


def name_comparisons(path: Path, root: Path = PACKAGE) -> list[str]:
    """`path`'s comparisons (`==`, `!=`, `in`, `not in`, `match` cases) of an expression
    with a name literal, but those of a name in the module holding its table: one line each,
    `relative/path.py:line: kind: source`."""
    module = path.relative_to(root).as_posix()
    allowed = {kind for kind, (table, _) in TABLES.items() if table == module}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and all(isinstance(o, COMPARISONS) for o in node.ops):
            consts = [c for o in (node.left, *node.comparators) for c in literals(o)]
            line, text = node.lineno, ast.unparse(node)
        elif isinstance(node, ast.match_case):
            consts = _pattern_literals(node.pattern)
            line, text = node.pattern.lineno, f"case {ast.unparse(node.pattern)}"
        else:
            continue
        kinds = _kinds([c.value for c in consts]) - allowed
        if kinds:
            found.append(f"{module}:{line}: {'/'.join(sorted(kinds))}: {text}")
    return found


def attribute_comparisons(path: Path) -> int:
    """`path`'s comparisons of an attribute with any string literal (`x.attr == "lit"`)."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and all(isinstance(o, COMPARISONS) for o in node.ops):
            operands = (node.left, *node.comparators)
            if any(isinstance(o, ast.Attribute) for o in operands) and any(
                literals(o) for o in operands
            ):
                count += 1
    return count


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def main() -> None:
    found = [line for path in modules() for line in name_comparisons(path)]
    print("\n".join(found))
    by_file = Counter(line.split(":")[0] for line in found)
    print(f"\nname literals compared outside their tables: {len(found)} in {len(by_file)} files")
    for module, n in by_file.most_common():
        print(f"  {n:3d}  {module}")
    attrs = {path: attribute_comparisons(path) for path in modules()}
    total, files = sum(attrs.values()), sum(1 for n in attrs.values() if n)
    print(f"attribute-vs-string-literal comparisons: {total} in {files} files")


if __name__ == "__main__":
    main()
