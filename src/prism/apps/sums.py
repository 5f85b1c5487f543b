"""Exact sums of integer columns, on both engines, whatever their size.

SQLite's SUM() of integers raises "integer overflow" past 2**63 (and TOTAL() is a float that loses cents);
PostgreSQL's SUM() of a BIGINT is an exact NUMERIC. So a column is summed in two halves that cannot
overflow on either engine — the quotient by 2**32 and the remainder — and Python, whose integers have
no limit, puts them back together. Truncating division and a remainder with the dividend's sign (both
engines') keep x == (x / 2**32) * 2**32 + x % 2**32 for negative values too.

Every money or quantity total of the business apps goes through here: a report shows it with `fitted`
(a JSON integer within the signed 64-bit range, past it its digits as a string), and a total kept in a
64-bit column is refused past that range with `storable` (409 conflict) rather than failing the write.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import Conflict
from prism.kit.numbers import SQL_BIGINT_MAX

_HALF = 2**32


def exact_sum(column: Any, *, where: Any = None) -> tuple[Any, Any]:
    """The two SQL aggregates whose values `joined()` turns into the sum of `column` (0 over no rows), over
    the rows that meet `where` when it is given (an aggregate FILTER)."""
    half = literal(_HALF, BigInteger)
    high: Any = func.sum(column.cast(BigInteger) // half)
    low: Any = func.sum(column.cast(BigInteger) % half)
    if where is not None:
        high, low = high.filter(where), low.filter(where)
    return func.coalesce(high, 0), func.coalesce(low, 0)


def joined(high: Any, low: Any) -> int:
    """The exact sum from the values of `exact_sum`'s two aggregates (None, as of an outer join, is 0)."""
    return int(high or 0) * _HALF + int(low or 0)


def fitted(value: int) -> int | str:
    """A total as a report shows it: an integer within the signed 64-bit range the columns hold (every JSON
    client reads it as such), beyond it its decimal digits as a string, as no JSON integer past 2**64 is encoded."""
    return value if -SQL_BIGINT_MAX - 1 <= value <= SQL_BIGINT_MAX else str(value)


def total(high: Any, low: Any) -> int | str:
    """`fitted` of the exact sum of `exact_sum`'s two aggregates."""
    return fitted(joined(high, low))


async def sum_of(session: AsyncSession, column: Any, *conditions: Any) -> int:
    """The exact sum of `column` over the rows that meet `conditions`."""
    high, low = (await session.execute(select(*exact_sum(column)).where(*conditions))).one()
    return joined(high, low)


def storable(value: int, what: str, remedy: str) -> int:
    """`value`, bound for a 64-bit column; past its range 409 conflict naming `what` would hold it and `remedy`."""
    if value > SQL_BIGINT_MAX or value < -SQL_BIGINT_MAX - 1:
        raise Conflict(f"{what} would total {value:,} cents, over the {SQL_BIGINT_MAX:,} it can hold; {remedy}",
                       details={"total_cents": str(value), "limit_cents": SQL_BIGINT_MAX})
    return value
