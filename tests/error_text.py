"""What a test reads of `roll`'s messages on stderr, which are wrapped at 80 columns with
their continuation lines indented (rollcli/cli/errors.py). Test modules import it as
`from error_text import error_message, flat`."""

from __future__ import annotations


def flat(text: str) -> str:
    """`text` with its line breaks and runs of blanks as single spaces: a phrase reads the
    same wherever the wrapping broke it."""
    return " ".join(text.split())


def error_message(stderr: str) -> str:
    """The one error message on `stderr`, as one line: its first line starts `error: `, any
    others continue it indented two spaces, and every line fits 80 columns (but a line of
    one path longer than that, which is never broken)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), stderr
    assert all(line.startswith("  ") for line in lines[1:]), stderr
    assert all(len(line) <= 80 or " " not in line.strip() for line in lines), stderr
    return " ".join(line.strip() for line in lines)
