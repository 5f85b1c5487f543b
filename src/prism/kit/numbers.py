"""Whole numbers a client writes as text: form fields, query parameters, path segments, headers, cursors."""

from __future__ import annotations

import re

# The largest value of a BIGINT column (SQLite stores every integer so), and of an INTEGER column, which
# PostgreSQL keeps in 32 bits: a number bound for a column stays at or below its type's.
SQL_BIGINT_MAX = 2**63 - 1
SQL_INT_MAX = 2**31 - 1
_WHOLE_NUMBER = re.compile(f"[0-9]{{1,{len(str(SQL_BIGINT_MAX))}}}")


def whole_number(text: str) -> int | None:
    """`text` as a whole number when it is ASCII digits only, at most as many as SQL_BIGINT_MAX has; else None.

    Not `str.isdigit()`: it also accepts digits such as "²" that `int()` refuses. Not `int()` alone: it also
    accepts signs, spaces, underscores and other scripts' digits, and refuses thousands of digits with a
    ValueError of its own. Callers still check the range they need."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else None
