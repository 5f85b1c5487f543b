"""An imported operation's arguments as the upstream expects them on the wire (OpenAPI 3.x "Style Values").

- Path: `simple` (default), `label`, `matrix`; each value percent-encoded whole (reserved characters included:
  RFC 3986 says `%3B` is not `;`), the style's own `,` `.` `;` `=` left as they are.
- Query: `form` (default), `spaceDelimited`, `pipeDelimited`, `deepObject`; a parameter described by `content`
  instead of a schema is that media type's text (JSON).
- Header: `simple`, never percent-encoded, line breaks taken out.
- A form body (application/x-www-form-urlencoded): each property `form`-exploded (an array repeats its name).

A whole number written as `7.0` is sent as `7` (JSON Schema counts it an integer, a URL reader does not).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson


def scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def path_value(parameter: dict[str, Any], value: Any) -> str:
    """What replaces `{name}` in the path."""
    name, style, explode = parameter["name"], parameter.get("style") or "simple", parameter.get("explode", False)

    def enc(text: str) -> str:
        return quote(text, safe="")

    if isinstance(value, list):
        items = [enc(scalar(v)) for v in value]
        if style == "label":
            return "." + ("." if explode else ",").join(items)
        if style == "matrix":
            return "".join(f";{enc(name)}={i}" for i in items) if explode else f";{enc(name)}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(enc(str(k)), enc(scalar(v))) for k, v in value.items()]
        flat = ",".join(f"{k},{v}" for k, v in pairs)
        if style == "label":
            return "." + (".".join(f"{k}={v}" for k, v in pairs) if explode else flat)
        if style == "matrix":
            return "".join(f";{k}={v}" for k, v in pairs) if explode else f";{enc(name)}={flat}"
        return ",".join(f"{k}={v}" for k, v in pairs) if explode else flat
    text = enc(scalar(value))
    if style == "label":
        return "." + text
    if style == "matrix":
        return f";{enc(name)}={text}"
    return text


def query_pairs(parameter: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    name, style, explode = parameter["name"], parameter.get("style", "form"), parameter.get("explode", True)
    if parameter.get("media"):  # described by `content`: the value in that media type (JSON)
        return [(name, orjson.dumps(value).decode())]
    if isinstance(value, list):
        if explode and style == "form":
            return [(name, scalar(v)) for v in value]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(style, ",")
        return [(name, separator.join(scalar(v) for v in value))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{k}]", scalar(v)) for k, v in value.items()]
        if explode:
            return [(str(k), scalar(v)) for k, v in value.items()]
        return [(name, ",".join(f"{k},{scalar(v)}" for k, v in value.items()))]
    return [(name, scalar(value))]


def header_value(parameter: dict[str, Any], value: Any) -> str:
    explode = parameter.get("explode", False)
    if isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif isinstance(value, dict):
        text = ",".join(f"{k}={scalar(v)}" if explode else f"{k},{scalar(v)}" for k, v in value.items())
    else:
        text = scalar(value)
    return text.replace("\r", " ").replace("\n", " ")


def form_pairs(value: dict[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, item in value.items():
        pairs += [(key, scalar(v)) for v in item] if isinstance(item, list) else [(key, scalar(item))]
    return pairs
