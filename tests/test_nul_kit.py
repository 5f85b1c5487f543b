"""prism.kit.nul: finding NUL (U+0000) in parsed JSON, forms, paths and query strings."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from prism.errors import BadRequest
from prism.kit.nul import (
    NUL_REFUSED,
    first_nul_field,
    nul_refusal,
    refuse_nul_in_form,
    refuse_nul_in_json,
    without_nul,
)


def nul_refused(field: str) -> dict[str, list[dict[str, str]]]:
    """The one 400 shape (prism.errors.problem_details) of a NUL refusal naming `field`."""
    return {"errors": [{"field": field, "message": "must not contain NUL (U+0000)"}]}


@pytest.mark.parametrize(("value", "field"), [
    ({"name": "a\x00b"}, "name"),
    ({"arguments": {"items": [{"name": "x"}, {}, {"name": "\x00"}]}}, "arguments.items[2].name"),
    ({"arguments": {"a\x00": 1}}, "arguments.a\\u0000"),
    (["ok", ["\x00"]], "[1][0]"),
    ("\x00", ""),
])
def test_the_first_nul_is_named_by_its_path(value: Any, field: str) -> None:
    assert first_nul_field(value) == field


def test_the_first_nul_in_document_order_wins() -> None:
    assert first_nul_field({"a": ["ok", {"b": "\x00"}], "c": "\x00"}) == "a[1].b"
    assert first_nul_field({"a": 1, "b\x00": "\x00", "c": "\x00"}) == "b\\u0000"


def test_values_without_nul_have_no_field() -> None:
    assert first_nul_field({"a": [1, 2.5, None, True, "text", {"b": "\\u0000 written out"}]}) is None


def test_nesting_deeper_than_pythons_recursion_limit_is_walked() -> None:
    value: Any = "\x00"
    for _ in range(5000):
        value = [value]
    assert first_nul_field(value) == "[0]" * 5000


def test_a_json_body_with_an_escaped_nul_is_refused_naming_the_field() -> None:
    body = b'{"operation": "list", "arguments": {"name": "x\\u0000"}}'
    with pytest.raises(BadRequest) as caught:
        refuse_nul_in_json(body, orjson.loads(body))
    assert caught.value.status == 400 and caught.value.code == NUL_REFUSED
    assert caught.value.message == "arguments.name: must not contain NUL (U+0000)"
    assert caught.value.details == nul_refused("arguments.name")


def test_a_json_string_body_holding_nul_names_the_body() -> None:
    with pytest.raises(BadRequest) as caught:
        refuse_nul_in_json(b'"\\u0000"', "\x00")
    assert caught.value.details == nul_refused("body")


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    body = b'{"path": "C:\\\\u0000"}'
    refuse_nul_in_json(body, orjson.loads(body))


def test_a_form_field_holding_nul_is_refused_naming_it() -> None:
    with pytest.raises(BadRequest) as caught:
        refuse_nul_in_form([("grant_type", "authorization_code"), ("code", "abc\x00")])
    assert caught.value.details == nul_refused("code")
    refuse_nul_in_form([("grant_type", "authorization_code")])


def _scope(path: str = "/api/x/", query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "path": path, "query_string": query}


def test_a_path_holding_nul_is_refused_as_path() -> None:
    refusal = nul_refusal(_scope("/api/v1/risk-assessment/governance/webhooks/ab\x00cd/"))
    assert refusal is not None and refusal.status == 400 and refusal.details == nul_refused("path")
    assert refusal.message == "path: must not contain NUL (U+0000)"


@pytest.mark.parametrize(("query", "field"), [
    (b"page=1&name=a%00b", "name"),
    (b"na%00me=x", "na\\u0000me"),
    (b"=%00", "query"),
])
def test_a_query_parameter_holding_nul_is_refused_naming_it(query: bytes, field: str) -> None:
    refusal = nul_refusal(_scope(query=query))
    assert refusal is not None and refusal.details == nul_refused(field)


def test_requests_without_nul_pass() -> None:
    assert nul_refusal(_scope(query=b"name=%2500&page=2")) is None
    assert nul_refusal(_scope()) is None


def test_text_from_elsewhere_is_kept_without_its_nuls() -> None:
    assert without_nul("a\x00b\x00") == "ab"
    assert without_nul("plain") == "plain"
