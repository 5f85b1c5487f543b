"""Tool annotations a client can act on: every handler that undoes, removes, invalidates or abandons something is
declared destructive, and the MCP tool surfaces say so — the split surface chosen by the deployment setting
(PRISM_MCP_TOOL_SURFACE) on a real `prism serve`, seen through the official SDK, and the 13 mega-tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from prism.registry.capability import IRREVERSIBLE_VERBS
from prism.registry.model import Handler
from prism.registry.registry import build_registry
from prism.registry.search import split_words, stem
from tests.factories import Factory
from tests.processes import Server, ServerPool, clean_env
from tests.test_mcp_clients import every_tool, sdk_client, text_of
from tests.test_mcp_protocol import PATH


def named_destructive(handler: Handler) -> bool:
    """Named by a verb of an act that cannot be undone (delete, void, cancel, retire, revoke, disable, ...): the
    list capability search orders results by, so what search calls irreversible a client is asked about."""
    return not IRREVERSIBLE_VERBS.isdisjoint(stem(w) for w in split_words(handler.coordinate.operation))


def test_every_handler_named_by_an_irreversible_verb_is_declared_destructive() -> None:
    registry = list(build_registry())
    named = [h for h in registry if named_destructive(h)]
    assert len(named) > 30  # the sweep sees the deletes, removes, cancels, voids, retires, revokes, ...
    undeclared = [h.path for h in named if not h.destructive]
    assert undeclared == []
    assert all(not h.read_only for h in named)


@pytest.fixture(scope="module")
def split_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pool = ServerPool(tmp_path_factory.mktemp("split-server"))
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_MCP_TOOL_SURFACE="split")
    try:
        yield pool.start(env=env)
    finally:
        pool.stop_all()


def admitted(tool: Any, handler: Handler) -> bool:
    """Whether the tool's input schema lets a client name this handler's coordinate."""
    properties = tool.input_schema["properties"]
    c = handler.coordinate
    return (tool.name.startswith(f"prism_{c.mega_tool}") and c.app in properties["app"]["enum"]
            and c.entity in properties["entity"]["enum"] and c.operation in properties["operation"]["enum"])


async def test_the_deployment_setting_serves_the_split_surface_whose_hints_hold_for_every_operation(
        split_server: Server, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    registry = [h for h in build_registry() if not h.people_only]  # a key never sees a person's handlers
    destructive = [h for h in registry if h.destructive or named_destructive(h)]
    async with sdk_client(split_server.base_url + PATH, ws.keys["owner"], "auto") as client:
        tools = {t.name: t for t in await every_tool(client)}
        assert "prism_entity_crud" not in tools and "prism_whoami" in tools
        assert {"prism_entity_crud_read", "prism_entity_crud_write", "prism_entity_crud_destructive",
                "prism_agent_command_destructive", "prism_mission_control_destructive"} <= set(tools)
        for handler in destructive:
            c = handler.coordinate
            home = tools[f"prism_{c.mega_tool}_destructive"]
            assert admitted(home, handler) and home.annotations is not None
            assert home.annotations.destructive_hint is True and home.annotations.read_only_hint is False
            # A tool that says it destroys nothing may list the same names for other handlers (its enums are
            # flat), but never runs this one: the call is refused before it reaches the dispatcher.
            for tool in tools.values():
                if tool.annotations is None or tool.annotations.destructive_hint is not False:
                    continue
                if admitted(tool, handler):
                    refused = await client.call_tool(tool.name, {"app": c.app, "entity": c.entity,
                                                                 "operation": c.operation, "arguments": {}})
                    assert text_of(refused)["error"] == "wrong_tool_variant", (tool.name, handler.path)
        # The destructive variant runs what it lists and the write variant refuses it.
        part = {"app": "spare_parts", "entity": "spare_part"}
        created = await client.call_tool("prism_entity_crud_write", {
            **part, "operation": "create", "arguments": {"sku": "SURFACE-1", "name": "Surface"}})
        delete = {**part, "operation": "delete", "arguments": {"id": text_of(created)["data"]["id"]}}
        wrong = await client.call_tool("prism_entity_crud_write", delete)
        assert text_of(wrong)["error"] == "wrong_tool_variant"
        for other in ("prism_entity_crud_write", "prism_entity_crud_read"):  # the envelope's `kwargs` wrapping
            wrapped = await client.call_tool(other, {"kwargs": delete})
            assert text_of(wrapped)["error"] == "wrong_tool_variant", other
        deleted = await client.call_tool("prism_entity_crud_destructive", delete)
        assert deleted.is_error is False
        again = await client.call_tool("prism_entity_crud_read", {**delete, "operation": "read"})
        assert text_of(again)["error"] == "not_found"

async def test_a_key_may_keep_the_mega_tools_whose_hints_cover_their_destructive_operations(
        split_server: Server, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    mega_key = await factory.add_key(ws, "mega-agent", tool_surface="mega")
    registry = list(build_registry())
    for url, key in ((split_server.base_url + PATH, mega_key),
                     (split_server.base_url + PATH + "?tools=mega", ws.keys["owner"])):
        async with sdk_client(url, key, "legacy") as client:
            tools = {t.name: t for t in await every_tool(client)}
        assert "prism_entity_crud" in tools and not any(n.endswith("_read") for n in tools)
        for handler in registry:
            tool = tools[f"prism_{handler.coordinate.mega_tool}"]
            assert tool.annotations is not None
            if handler.destructive or named_destructive(handler):
                assert tool.annotations.destructive_hint is True, (tool.name, handler.path)
