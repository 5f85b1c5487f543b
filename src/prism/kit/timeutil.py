from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def utcnow() -> datetime:
    return datetime.now(UTC)


@overload
def iso(value: datetime) -> str: ...


@overload
def iso(value: None) -> None: ...


@overload
def iso(value: datetime | None) -> str | None: ...


def iso(value: datetime | None) -> str | None:
    """ISO 8601 with `Z` for UTC (a naive value is taken as UTC): `isoformat()`'s text, fraction left out when
    zero, formatted directly for UTC values (every audit entry and record date is one)."""
    if value is None:
        return None
    zone = value.tzinfo
    if zone is UTC or zone is None:
        if value.microsecond:
            return _ISO_UTC_MICROSECONDS % (value.year, value.month, value.day, value.hour, value.minute,
                                            value.second, value.microsecond)
        return _ISO_UTC % (value.year, value.month, value.day, value.hour, value.minute, value.second)
    return value.isoformat().replace("+00:00", "Z")


_ISO_UTC = "%04d-%02d-%02dT%02d:%02d:%02dZ"
_ISO_UTC_MICROSECONDS = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"
