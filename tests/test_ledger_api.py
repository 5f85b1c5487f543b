"""The audit ledger through the API (audit_query/ledger/...): filters, one entry, verification, export —
RBAC for each, and another organization's or tenant's entries never shown."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import httpx
from sqlalchemy import select, update

from prism.ledger.entries import audit_entries
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.governance_support import governed_key, ok, post
from tests.ledger_support import seal_waiting

LIST, READ = "audit_query/ledger/entry/list", "audit_query/ledger/entry/read"
EXPORT, VERIFY = "audit_query/ledger/entry/export", "audit_query/ledger/log/verify"
PARTS = "entity_crud/spare_parts/spare_part"


async def _busy_workspace(client: httpx.AsyncClient, factory: Factory,
                          db: Database) -> tuple[Workspace, dict[str, Any]]:
    """Calls by three people: an owner's create, a viewer's refused create, an agent with a persona and an AI
    system listing parts."""
    ws = await factory.workspace(roles=("owner", "viewer", "member"))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "reader", "default": "allow"},
                              risk_level="limited")
    await ok(client, ws, f"{PARTS}/create", {"sku": "L1", "name": "ledger part"})
    refused = await post(client, ws, f"{PARTS}/create", {"sku": "L2", "name": "no"}, label="viewer")
    assert refused.status_code == 403
    await ok(client, ws, f"{PARTS}/list", {}, label="agent")
    await seal_waiting(db, ws.org.id)
    return ws, made


async def test_entries_are_listed_newest_first_and_filtered_by_each_field(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws, made = await _busy_workspace(client, factory, db)
    everything = await ok(client, ws, LIST, {"page_size": 100})
    positions = [e["seq"] for e in everything["items"]]  # written, so sealed, in this order
    assert positions == sorted(positions, reverse=True) and everything["total"] == len(positions)
    assert {"page", "page_size", "total", "items"} <= set(everything)
    newest = everything["items"][0]
    assert newest["coordinate"] == f"{PARTS}/list" and newest["sealed"] and len(newest["leaf_hash"]) == 64

    async def coordinates(**filters: Any) -> list[str]:
        page = await ok(client, ws, LIST, {"page_size": 100, **filters})
        return [e["coordinate"] for e in page["items"]]

    assert await coordinates(outcome="refused") == [f"{PARTS}/create"]
    viewer = await ok(client, ws, LIST, {"actor": ws.emails["viewer"].upper()})
    assert [(e["outcome"], e["error_code"], e["actor_email"]) for e in viewer["items"]] == [
        ("refused", "permission_denied", ws.emails["viewer"])]
    assert (await ok(client, ws, LIST, {"actor": viewer["items"][0]["actor_user_id"]}))["total"] == 1
    assert await coordinates(actor="nobody@example.com") == []
    assert await coordinates(persona_id=made["persona"]["id"]) == [f"{PARTS}/list"]
    assert await coordinates(ai_system_id=made["ai_system"]["id"]) == [f"{PARTS}/list"]
    assert await coordinates(coordinate=f"{PARTS}/*", outcome="allowed") == [f"{PARTS}/list", f"{PARTS}/create"]
    assert await coordinates(coordinate="entity_crud/spare_parts/spare_part/crea*") == [f"{PARTS}/create"] * 2
    assert await coordinates(coordinate="entity_crud/spare\\_parts/%") == []  # LIKE's own characters are literal
    agent_credential = (await ok(client, ws, LIST, {"persona_id": made["persona"]["id"]}))["items"][0]
    assert await coordinates(credential_id=agent_credential["credential_id"]) == [f"{PARTS}/list"]
    first, last = min(e["seq"] for e in everything["items"]), max(e["seq"] for e in everything["items"])
    assert len(await coordinates(seq_from=last - 1, seq_to=last)) == 2
    assert await coordinates(since="2999-01-01T00:00:00Z") == []
    assert len(await coordinates(since=newest["created_at"])) >= 1
    assert await coordinates(until="2000-01-01T00:00:00+00:00") == []
    paged = await ok(client, ws, LIST, {"page": 2, "page_size": 2, "ordering": "seq"})
    assert [e["seq"] for e in paged["items"]] == [first + 2, first + 3]


async def test_bad_filters_are_refused_with_the_field_named(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for arguments, field in (({"since": "2026-01-01T00:00:00"}, "since"), ({"outcome": "maybe"}, "outcome"),
                             ({"seq_from": 0}, "seq_from"), ({"ordering": "coordinate"}, "ordering"),
                             ({"page_size": 101}, "page_size")):
        response = await post(client, ws, LIST, arguments)
        assert response.status_code == 400, (arguments, response.text)
        assert field in response.text
    backwards = await post(client, ws, LIST, {"seq_from": 5, "seq_to": 2})
    assert backwards.status_code == 400 and "seq_to" in backwards.json()["message"]
    no_id = await post(client, ws, READ, {})
    assert no_id.status_code == 400 and "id" in no_id.text


async def test_a_position_beyond_what_the_database_stores_or_an_id_not_an_entrys_is_refused_with_the_field_named(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    largest = 2**63 - 1  # positions are BIGINT
    for path, arguments, field in ((LIST, {"seq_from": largest + 1}, "seq_from"),
                                   (LIST, {"seq_to": largest + 1}, "seq_to"),
                                   (EXPORT, {"seq_from": largest + 1}, "seq_from"),
                                   (READ, {"id": 7}, "id"),  # a row's number is not how an entry is named
                                   (READ, {"id": "7"}, "id"),
                                   (READ, {"id": "g" * 32}, "id"),
                                   (READ, {"id": "a" * 33}, "id")):
        response = await post(client, ws, path, arguments)
        assert response.status_code == 400, (path, arguments, response.text)
        assert response.json()["error"] == "invalid_arguments" and field in response.json()["message"]
    assert (await ok(client, ws, LIST, {"seq_from": largest, "seq_to": largest}))["items"] == []
    missing = await post(client, ws, READ, {"id": "a" * 32})
    assert missing.status_code == 404, missing.text


async def test_an_organizations_entry_ids_tell_nothing_of_other_tenants_calls(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Entries are numbered by one sequence for the deployment; shown as they are, the ids of two of an
    organization's calls would count every other tenant's calls between them (docs/audit.md)."""
    ours = await factory.workspace(roles=("owner",))
    theirs = await factory.workspace(roles=("owner",))
    await ok(client, ours, f"{PARTS}/list", {})
    for _ in range(5):
        await ok(client, theirs, f"{PARTS}/list", {})
    await ok(client, ours, f"{PARTS}/list", {})
    await seal_waiting(db, ours.org.id)
    newer, older = (await ok(client, ours, LIST, {"ordering": "-id"}))["items"][:2]
    async with db.read() as s:
        rows = dict((await s.execute(select(audit_entries.c.seq, audit_entries.c.id).where(
            audit_entries.c.organization_id == ours.org.id))).all())
    assert rows[newer["seq"]] - rows[older["seq"]] == 6  # the other tenant's five calls lie between
    for shown in (newer, older):
        assert isinstance(shown["id"], str) and len(shown["id"]) == 32 and shown["id"] != str(rows[shown["seq"]])
        assert int(shown["id"], 16) != rows[shown["seq"]]
    again = await ok(client, ours, LIST, {"seq_from": newer["seq"], "seq_to": newer["seq"]})
    assert again["items"][0]["id"] == newer["id"]  # the same each time it is shown
    assert (await ok(client, ours, READ, {"id": newer["id"].upper()}))["seq"] == newer["seq"]
    # Named under another organization's key, even our own row is nobody's entry here.
    their_name_for_ours = ledger_keys().entry_ref(theirs.org.id, rows[newer["seq"]])
    assert (await post(client, ours, READ, {"id": their_name_for_ours})).status_code == 404


async def test_one_entry_shows_its_hash_links_and_checks(client: httpx.AsyncClient, factory: Factory,
                                                         db: Database) -> None:
    ws, _ = await _busy_workspace(client, factory, db)
    newest = (await ok(client, ws, LIST, {"page_size": 1}))["items"][0]
    by_id = await ok(client, ws, READ, {"id": newest["id"]})
    assert by_id["id"] == newest["id"] and by_id["seq"] == newest["seq"]
    assert by_id["checks"] == {"content_matches_hash": True, "mac_fits_position": True}
    assert by_id["previous_seq"] == newest["seq"] - 1
    assert by_id["head"]["tree_size"] >= newest["seq"] and by_id["head"]["checkpoint"]["signature"]
    [at_previous] = (await ok(client, ws, LIST, {"seq_from": by_id["previous_seq"],
                                                 "seq_to": by_id["previous_seq"]}))["items"]
    older = await ok(client, ws, READ, {"id": at_previous["id"]})
    assert older["next_seq"] == newest["seq"]
    missing = await post(client, ws, READ, {"id": "0" * 32})
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


async def test_verification_names_the_first_entry_someone_rewrote(client: httpx.AsyncClient, factory: Factory,
                                                                  db: Database) -> None:
    ws, _ = await _busy_workspace(client, factory, db)
    for start in ("first_entry", "latest_checkpoint"):
        report = await ok(client, ws, VERIFY, {"start": start})
        assert report["valid"] is True and report["reason"] is None and report["start"] == start, report
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["checked"] >= 5 and report["head"]["tree_size"] == report["tree_size"]
    refused = (await ok(client, ws, LIST, {"outcome": "refused"}))["items"][0]
    async with db.write() as s:  # a refusal turned into a success, as someone with database access might
        await s.execute(update(audit_entries).where(
            audit_entries.c.id == ledger_keys().entry_id_of(ws.org.id, refused["id"]))
                        .values(outcome="allowed", error_code=None))
    broken = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert broken["valid"] is False and broken["first_broken_id"] == refused["id"]
    assert broken["first_broken_seq"] == refused["seq"] and "hash" in broken["reason"]
    shown = await ok(client, ws, READ, {"id": refused["id"]})
    assert shown["checks"]["content_matches_hash"] is False


async def test_export_writes_json_lines_and_csv_in_log_order_and_continues(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws, _ = await _busy_workspace(client, factory, db)
    whole = await ok(client, ws, EXPORT, {})
    lines = [json.loads(line) for line in whole["content"].splitlines()]
    assert whole["media_type"] == "application/jsonl" and whole["count"] == len(lines) >= 5
    assert [line["seq"] for line in lines] == list(range(lines[0]["seq"], lines[0]["seq"] + len(lines)))
    assert whole["next_seq_from"] is None and whole["first_seq"] == lines[0]["seq"]
    first = await ok(client, ws, EXPORT, {"limit": 2, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(first["content"])))
    assert first["media_type"] == "text/csv" and len(rows) == 2
    assert first["next_seq_from"] == int(rows[1]["seq"]) + 1
    assert json.loads(rows[0]["detail"]) == lines[0]["detail"] and rows[0]["entry_hash"] == lines[0]["entry_hash"]
    # The exports are calls too, with entries of their own: the range ends where the first export did.
    rest = await ok(client, ws, EXPORT, {"seq_from": first["next_seq_from"], "seq_to": lines[-1]["seq"]})
    assert rest["count"] == whole["count"] - 2 and rest["last_seq"] == lines[-1]["seq"]
    refused = await ok(client, ws, EXPORT, {"outcome": "refused", "format": "csv"})
    assert refused["count"] == 1 and "permission_denied" in refused["content"]


async def test_each_role_may_do_what_its_permissions_say(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    await ok(client, ws, f"{PARTS}/list", {})
    for role in ("owner", "member", "viewer"):
        assert (await post(client, ws, LIST, {}, label=role)).status_code == 200
        assert (await post(client, ws, VERIFY, {}, label=role)).status_code == 200
    assert (await post(client, ws, EXPORT, {}, label="owner")).status_code == 200
    for role in ("member", "viewer"):
        denied = await post(client, ws, EXPORT, {}, label=role)
        assert denied.status_code == 403 and "ledger.export_entry" in denied.json()["message"]


async def test_another_organizations_or_tenants_entries_are_never_shown(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ours, _ = await _busy_workspace(client, factory, db)
    theirs = await factory.workspace(roles=("owner",))
    await ok(client, theirs, f"{PARTS}/list", {})
    sibling = await factory.second_org(ours)
    await factory.add_key(ours, "sibling", org=sibling)
    await ok(client, ours, f"{PARTS}/list", {}, label="sibling")
    await seal_waiting(db, theirs.org.id)
    await seal_waiting(db, sibling.id)
    our_entries = (await ok(client, ours, LIST, {"page_size": 100}))["items"]
    their_entries = (await ok(client, theirs, LIST, {"page_size": 100}))["items"]
    sibling_entries = (await ok(client, ours, LIST, {"page_size": 100}, label="sibling"))["items"]
    our_ids = {e["id"] for e in our_entries}
    assert our_ids.isdisjoint(e["id"] for e in their_entries)
    assert our_ids.isdisjoint(e["id"] for e in sibling_entries)
    for entry in their_entries + sibling_entries:
        answer = await post(client, ours, READ, {"id": entry["id"]})
        assert answer.status_code == 404, answer.text
    exported = await ok(client, ours, EXPORT, {})
    exported_ids = {json.loads(line)["id"] for line in exported["content"].splitlines()}
    assert our_ids <= exported_ids and exported_ids.isdisjoint(e["id"] for e in their_entries + sibling_entries)
    # Their log: the entries listed, the listing's own, and the verification's own (checked once its call
    # committed; sealed by then, or waiting).
    theirs_verified = await ok(client, theirs, VERIFY, {"start": "first_entry"})
    assert theirs_verified["tree_size"] + theirs_verified["waiting"] == len(their_entries) + 2, theirs_verified
    other_host = await post(client, ours, LIST, {}, headers={"Host": theirs.host})
    assert other_host.status_code == 401
