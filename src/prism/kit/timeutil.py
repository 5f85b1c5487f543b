from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


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


# How SQLAlchemy's SQLite dialect stores a datetime: naive text, "YYYY-MM-DD HH:MM:SS.ffffff" (always six
# fraction digits); prism.models.base.UTCDateTime stores it in UTC. Its processors, through a datetime,
# cost ~2.5 µs a value each way; these two go straight between the text and what Prism needs.
_SQLITE_TEXT = "%04d-%02d-%02d %02d:%02d:%02d.%06d"


def sqlite_text_of(value: object) -> str | None:
    """The text UTCDateTime stores on SQLite for a datetime in UTC; None for any other value."""
    if type(value) is not datetime or value.tzinfo is not UTC:
        return None
    return _SQLITE_TEXT % (value.year, value.month, value.day, value.hour, value.minute, value.second,
                           value.microsecond)


# Texts already converted: records are read again and again (a dispatch reads two dates per record), and a
# lookup costs a tenth of checking and slicing the text. Bounded: emptied when full.
_ISO_OF_TEXT: dict[str, str] = {}
_ISO_OF_TEXT_MAX = 8192


def iso_of_sqlite_text(text: str) -> str | None:
    """`iso()` of the UTC datetime SQLite stores as `text`; None if the text has another form."""
    known = _ISO_OF_TEXT.get(text)
    if known is not None:
        return known
    converted = _convert_sqlite_text(text)
    if converted is not None:
        if len(_ISO_OF_TEXT) >= _ISO_OF_TEXT_MAX:
            _ISO_OF_TEXT.clear()
        _ISO_OF_TEXT[text] = converted
    return converted


def _convert_sqlite_text(text: str) -> str | None:
    if (len(text) != 26 or text[4] != "-" or text[7] != "-" or text[10] != " " or text[13] != ":"
            or text[16] != ":" or text[19] != "."):
        return None
    # Parsing checks that the other characters are the fields' digits, and fails on an impossible date as
    # reading the text into a datetime would. A text ending in a time zone is left to the full conversion.
    if datetime.fromisoformat(text).tzinfo is not None:
        return None
    if text.endswith(".000000"):  # isoformat() leaves out a zero fraction
        return text[:10] + "T" + text[11:19] + "Z"
    return text[:10] + "T" + text[11:] + "Z"
