"""CI runs with PRISM_REQUIRE_NODE_CLIENTS=1: a Node.js client that cannot be installed fails the run there, where
a developer's machine without npm only skips those tests."""

from __future__ import annotations

import pytest

from tests.mcp_clients import REQUIRED, unavailable


def test_missing_node_clients_skip_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRED, raising=False)
    with pytest.raises(pytest.skip.Exception, match="npm is not installed"):
        unavailable("npm is not installed")


def test_missing_node_clients_fail_where_they_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRED, "1")
    with pytest.raises(pytest.fail.Exception, match=r"npm install failed.*PRISM_REQUIRE_NODE_CLIENTS=1"):
        unavailable("npm install failed")
