"""stable_digest fingerprints a call's arguments (the idempotency key's body, the ledger's arguments digest)
whatever a client sent: values orjson cannot encode get a digest of their own too, never a shared one."""

from __future__ import annotations

from typing import Any

from prism.kit.canonical import digest, stable_digest


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


def test_values_nested_deeper_than_orjson_encodes_keep_their_own_digests() -> None:
    # 300 levels: past orjson's 254; 1,020: within the 1,024 a request body may nest, past what repr() reaches.
    for depth in (300, 1_020):
        first, other = _nested(depth, "first body"), _nested(depth, "other body")
        assert stable_digest(first) != stable_digest(other)
        assert stable_digest(first) == stable_digest(_nested(depth, "first body"))
    assert stable_digest(_nested(300, 1)) != stable_digest(_nested(301, 1))


def test_keys_are_sorted_and_values_that_are_not_json_differ_from_json_ones() -> None:
    deep = _nested(300, {"b": 1, "a": [True, None, 2.5]})
    assert stable_digest(deep) == stable_digest(_nested(300, {"a": [True, None, 2.5], "b": 1}))
    assert stable_digest([10**30]) != stable_digest(["<int 1000000000000000000000000000000>"])
    assert stable_digest({"a": 1}) == digest({"a": 1})  # what orjson encodes is digested as before
