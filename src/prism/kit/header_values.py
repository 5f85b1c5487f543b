"""What an outbound request's header value may hold: RFC 9110 5.5 field values (visible characters, spaces and
tabs). The HTTP clients refuse any other control character when sending (a header injection guard), so a value
with one would fail every request it is part of: refused when it is saved instead."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def sendable(value: str) -> bool:
    """Whether `value` can be sent as a header value: no control character but the tab."""
    return _CONTROL.search(value) is None
