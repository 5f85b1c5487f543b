"""Migration 0031 masks the URL keys an older Prism kept in held calls' stored arguments (`?api_key=...` in an
endpoint's or a connection's URL, each value of an endpoint call's `query`), as a request is stored now, and every
read shows them so; the digest, bound to the arguments as sent, is kept. Stepping down changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection

from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok, post
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _with_app
from tests.test_documents_word_counts_migration import _on
from tests.test_integrations_url_secrets import texts_holding

BEFORE = "0030_spare_parts_opening_stock"
KEY = "s3cret-" + "q" * 12
MASK = "********"
CREATE, CALL = "entity_crud/integrations/endpoint/create", "integration_call/integrations/endpoint/call"
CONNECT, GONE = "config_manage/integrations/connection/set", "entity_crud/retired/thing/create"
# What an older Prism kept of each held call: its `writeOnly` fields masked, its URLs' keys in the clear.
STORED_BEFORE: dict[str, tuple[str, dict[str, Any] | None]] = {
    "ovr_a_create": (CREATE, {"name": "Stock", "base_url": f"https://erp.example.com/v2?api_key={KEY}&region=eu",
                              "description": "see https://docs.example.com/?page=2", "default_method": "GET"}),
    "ovr_b_call": (CALL, {"id": "e1", "path": "/items/7", "query": {"api_key": KEY, "fields": "name"}}),
    "ovr_c_connect": (CONNECT, {"name": "oas_depot", "base_url": f"https://user:{KEY}@api.example.com/v1",
                                "token_url": f"https://api.example.com/oauth/token?tenant={KEY}#{KEY}",
                                "auth_kind": "oauth2_client_credentials", "client_id": "prism", "secret": MASK}),
    "ovr_d_none": (CALL, None),  # a request made before arguments were kept
    "ovr_e_gone": (GONE, {"url": "https://plain.example.com/?page=2"}),  # no handler says what is secret
}
SHOWN_AFTER: dict[str, dict[str, Any] | None] = {
    "ovr_a_create": {**STORED_BEFORE["ovr_a_create"][1],  # type: ignore[dict-item]
                     "base_url": f"https://erp.example.com/v2?api_key={MASK}&region={MASK}"},
    "ovr_b_call": {"id": "e1", "path": "/items/7", "query": {"api_key": MASK, "fields": MASK}},
    "ovr_c_connect": {**STORED_BEFORE["ovr_c_connect"][1],  # type: ignore[dict-item]
                      "base_url": "https://api.example.com/v1",
                      "token_url": f"https://api.example.com/oauth/token?tenant={MASK}#{MASK}"},
    "ovr_d_none": None,
    "ovr_e_gone": STORED_BEFORE["ovr_e_gone"][1],
}


async def _held(db: Database, client: httpx.AsyncClient) -> tuple[Workspace, str]:
    """A workspace whose agent's endpoint saves are held, and one such held request (its URL keyless)."""
    factory = Factory(db)
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={
        "name": "reviewed-endpoints", "default": "allow", "oversight": [CREATE]})
    escalated = await post(client, ws, CREATE, {"name": "Plain", "base_url": "https://erp.example.com/v2"},
                           label="agent")
    assert escalated.status_code == 202 and escalated.json()["error"] == "oversight_required", escalated.text
    return ws, escalated.json()["details"]["oversight_request_id"]


def _store_as_before(template_id: str) -> Any:
    """Rows as an older Prism wrote them, each a copy of the held request but for its id, coordinate and
    arguments (and digest, which the upgrade must keep as it is)."""
    def store(connection: Connection) -> None:
        row = dict(connection.execute(sa.text("SELECT * FROM oversight_requests WHERE id = :id"),
                                      {"id": template_id}).mappings().one())
        table = sa.table("oversight_requests", *(sa.column(name) for name in row if name != "arguments"),
                         sa.column("arguments", sa.JSON))
        for request_id, (coordinate, arguments) in STORED_BEFORE.items():
            connection.execute(table.insert().values({**row, "id": request_id, "coordinate": coordinate,
                                                      "arguments": arguments, "arguments_digest": request_id}))
    return store


def _stored(connection: Connection) -> dict[str, tuple[Any, str]]:
    table = sa.table("oversight_requests", sa.column("id"), sa.column("arguments", sa.JSON),
                     sa.column("arguments_digest"))
    return {row.id: (row.arguments, row.arguments_digest)
            for row in connection.execute(sa.select(table).where(table.c.id.in_(STORED_BEFORE)))}


async def test_the_upgrade_masks_url_keys_in_stored_held_calls_and_reads_show_them_masked(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "oversightmasks") as url:
        await asyncio.to_thread(migrate_with_alembic, url)
        ws, held_id = await _with_app(url, _held)
        config = alembic_config(url)
        await asyncio.to_thread(command.downgrade, config, BEFORE)
        await _on(url, _store_as_before(held_id))

        await asyncio.to_thread(command.upgrade, config, "head")
        expected = {request_id: (SHOWN_AFTER[request_id], request_id) for request_id in STORED_BEFORE}
        assert await _on(url, _stored) == expected  # masked, each digest as it was
        await asyncio.to_thread(command.downgrade, config, BEFORE)  # nothing to give back
        assert await _on(url, _stored) == expected
        await asyncio.to_thread(command.upgrade, config, "head")  # masking what is masked changes nothing
        assert await _on(url, _stored) == expected

        async def read(db: Database, client: httpx.AsyncClient) -> None:
            for request_id in STORED_BEFORE:
                shown = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
                assert shown["arguments"] == SHOWN_AFTER[request_id], shown
            listed = await ok(client, ws, "governance_review/governance/oversight_request/list", {"page_size": 100})
            assert {r["id"] for r in listed["items"]} >= set(STORED_BEFORE) and KEY not in json.dumps(listed)
            assert await texts_holding(db, KEY) == []

        await _with_app(url, read)
