"""Text shown to a person: names and paths as a terminal or a page would show them safely.

A namespace or table name may hold any character but the control bytes the key encoding
refuses, so it may hold Unicode's format characters (category Cf): the right-to-left override
U+202E showed a table name reversed in ``table list`` and in every summary, and zero-width
characters make two different names look alike. Every line the command line and the jobs print
for a person goes through ``escape_for_display``: a control character (category Cc, but for the
newline and the tab that lay out the text), a format character, a lone surrogate (a path that is
not UTF-8) or a line or paragraph separator is written as ``\\uXXXX`` (``\\UXXXXXXXX`` above
the BMP), the form Python's ``repr`` gives it. JSON output needs nothing of this: it is written
ASCII-only, with JSON's own escapes.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

_ESCAPED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_KEPT: Final = frozenset({"\n", "\t"})
# Everything outside printable ASCII is looked at; plain ASCII text takes the fast path.
_MAYBE_UNSAFE: Final = re.compile(r"[^\x20-\x7e\n\t]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _KEPT or unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_for_display(text: str) -> str:
    """``text`` with every character a terminal would act on, rather than show, escaped."""
    return _MAYBE_UNSAFE.sub(_escaped, text)


__all__ = ["escape_for_display"]
