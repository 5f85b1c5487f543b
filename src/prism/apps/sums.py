"""Exact sums of integer columns, on both engines, whatever their size.

SQLite's SUM() of integers raises "integer overflow" past 2**63 (and TOTAL() is a float that loses cents);
PostgreSQL's SUM() of a BIGINT is an exact NUMERIC. So a column is summed in two halves that cannot
overflow on either engine — the quotient by 2**32 and the remainder — and Python, whose integers have
no limit, puts them back together. Truncating division and a remainder with the dividend's sign (both
engines') keep x == (x / 2**32) * 2**32 + x % 2**32 for negative values too.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, func, literal

from prism.kit.numbers import SQL_BIGINT_MAX

_HALF = 2**32


def exact_sum(column: Any) -> tuple[Any, Any]:
    """The two SQL aggregates whose values `total()` joins into the sum of `column` (0 over no rows)."""
    half = literal(_HALF, BigInteger)
    return (func.coalesce(func.sum(column.cast(BigInteger) // half), 0),
            func.coalesce(func.sum(column.cast(BigInteger) % half), 0))


def total(high: Any, low: Any) -> int | str:
    """The exact sum: an integer within the signed 64-bit range the columns hold (every JSON client reads
    it as such), beyond it its decimal digits as a string, as no JSON integer past 2**64 is encoded."""
    value = int(high) * _HALF + int(low)
    return value if -SQL_BIGINT_MAX - 1 <= value <= SQL_BIGINT_MAX else str(value)
