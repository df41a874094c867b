"""The demo's figures live in docs/results.md; README's short "What the demo shows" repeats
some of them and must not drift (issue #87): every number README's section states is in
results.md's demo section, and the section stays short."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else None]


def _figures(text: str) -> set[str]:
    """Decimal figures (0.293, 4.1, [0.241, 0.351]) and dates, as written."""
    return set(re.findall(r"\d{4}-\d{2}-\d{2}|\d+\.\d+", text))


def test_readme_demo_figures_are_the_results_page_figures() -> None:
    readme = _section((ROOT / "README.md").read_text(), "## What the demo shows")
    results = _section((ROOT / "docs" / "results.md").read_text(), "## The demo")
    stated = _figures(readme)
    assert stated, "README's demo section states no figure"
    missing = sorted(stated - _figures(results))
    assert not missing, f"README states {missing}, which docs/results.md's demo section lacks"
    body = [line for line in readme.splitlines()[1:] if line.strip()]
    assert len(body) <= 12, f"README's demo section has {len(body)} lines (at most 12)"
