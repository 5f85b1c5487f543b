"""The audit ledger: every dispatch is recorded and sealed into its organization's signed tree, and `prism audit
verify` (a real process on the test database) names the first entry an attacker with SQL access touched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update

from prism.apps.spare_parts.models import SparePart
from prism.identity.service import add_to_organization, require_user
from prism.keys.service import create_key
from prism.ledger.checkpoints import parse_checkpoint
from prism.ledger.entries import audit_entries, audit_heads, content_hash, content_of
from prism.ledger.merkle import Frontier, leaf_hash
from prism.models import Organization, Tenant
from prism.storage import Database
from prism.tenancy.service import create_organization
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import seal_waiting
from tests.processes import TRACEBACK, CliResult, run_cli

TOOL = "/api/mcp/tools/prism_entity_crud/"
PART = "entity_crud/spare_parts/spare_part"
# What the calls of `record_calls` leave in the ledger, in order: (outcome, coordinate, error code).
EXPECTED = [
    ("allowed", f"{PART}/create", None),
    ("allowed", f"{PART}/list", None),
    ("refused", f"{PART}/create", "permission_denied"),
    ("refused", f"{PART}/explode", "operation_not_found"),
    ("refused", f"{PART}/create", "invalid_arguments"),
    ("allowed", f"{PART}/read", None),
    ("refused", f"{PART}/create", "conflict"),
]
N = len(EXPECTED)
BODY_FIELDS = ("tenant_id", "created_at", "actor_user_id", "credential_id", "door", "tool_name", "coordinate",
               "arguments_digest", "outcome", "error_code", "detail")


async def record_calls(client: httpx.AsyncClient, headers: Callable[[str], dict[str, str]]) -> None:
    """Allowed and refused calls through the canonical door, one after the other; `headers(role)`."""

    async def call(role: str, operation: str, arguments: dict[str, Any], status: int) -> dict[str, Any]:
        r = await client.post(TOOL, headers=headers(role), json={
            "app": "spare_parts", "entity": "spare_part", "operation": operation, "arguments": arguments})
        assert r.status_code == status, r.text
        body: dict[str, Any] = r.json()
        return body

    part = (await call("owner", "create", {"sku": "LED-1", "name": "Ledger part"}, 200))["data"]
    await call("viewer", "list", {}, 200)
    await call("viewer", "create", {"sku": "LED-2", "name": "Not allowed"}, 403)
    await call("owner", "explode", {}, 404)
    await call("owner", "create", {"sku": "LED-3", "name": "Bad", "quantity": -1}, 400)
    await call("owner", "read", {"id": part["id"]}, 200)
    await call("owner", "create", {"sku": "LED-1", "name": "Duplicate"}, 409)


async def ledger_rows(db: Database, org_id: str) -> list[Any]:
    await seal_waiting(db, org_id)
    async with db.read() as s:
        rows = await s.execute(select(audit_entries).where(audit_entries.c.organization_id == org_id)
                               .order_by(audit_entries.c.seq))
        return list(rows)


def verify(database_url: str, ws: Workspace, *extra: str) -> CliResult:
    return run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, *extra, database_url=database_url)


def chain_of(result: CliResult, org_id: str) -> dict[str, Any]:
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    chains = [c for c in result.json["logs"] if c["organization_id"] == org_id]
    assert len(chains) == 1, str(result)
    chain: dict[str, Any] = chains[0]
    return chain


@pytest.fixture
async def ws(client: httpx.AsyncClient, factory: Factory) -> Workspace:
    workspace = await factory.workspace(roles=("owner", "viewer"))
    await record_calls(client, workspace.headers)
    await seal_waiting(factory.db, workspace.org.id)
    return workspace


async def test_every_call_allowed_or_refused_is_sealed_in_order_into_the_signed_tree(
        db: Database, ws: Workspace) -> None:
    rows = await ledger_rows(db, ws.org.id)
    assert [(r.outcome, r.coordinate, r.error_code) for r in rows] == EXPECTED
    assert [r.seq for r in rows] == list(range(1, N + 1))
    assert {r.door for r in rows} == {"rest"} and {r.tool_name for r in rows} == {"prism_entity_crud"}
    assert {r.tenant_id for r in rows} == {ws.tenant.id}
    tree = Frontier()
    for row in rows:
        assert row.entry_hash == content_hash(content_of(row)) and row.prev_hash is None and row.hash is None
        assert ledger_keys().mac_fits(ws.org.id, row.seq, row.entry_hash, row.mac)
        tree.append(leaf_hash(row.seq, bytes.fromhex(row.entry_hash)))
    async with db.read() as s:
        head = (await s.execute(select(audit_heads).where(audit_heads.c.organization_id == ws.org.id))).one()
    assert (head.tree_size, head.root) == (N, tree.root().hex())
    signed = parse_checkpoint(head.checkpoint)
    assert signed.verifies(ledger_keys().public_key) and (signed.tree_size, signed.root) == (N, head.root)
    # The refused duplicate left nothing behind; the refused viewer create neither.
    async with db.read() as s:
        skus = (await s.execute(select(SparePart.sku).where(SparePart.organization_id == ws.org.id))).scalars()
        assert sorted(skus) == ["LED-1"]


async def test_untouched_log_verifies(database_url: str, ws: Workspace) -> None:
    result = verify(database_url, ws, "--json")
    assert result.returncode == 0, str(result)
    assert result.json["valid"] is True and result.json["tenant"] == ws.tenant.subdomain
    assert chain_of(result, ws.org.id) == {
        "organization": ws.org.slug, "organization_id": ws.org.id, "tree_size": N, "checked": N, "waiting": 0,
        "since": 0, "valid": True, "first_broken_seq": None, "first_broken_id": None, "reason": None}


# --- tampering ---------------------------------------------------------------------------------------

Tamper = Callable[[Database, str], Awaitable[None]]


def at(org_id: str, seq: int) -> Any:
    return (audit_entries.c.organization_id == org_id) & (audit_entries.c.seq == seq)


async def _row(db: Database, org_id: str, seq: int) -> Any:
    async with db.read() as s:
        return (await s.execute(select(audit_entries).where(at(org_id, seq)))).one()


def set_fields(seq: int, **values: Any) -> Tamper:
    async def tamper(db: Database, org_id: str) -> None:
        async with db.write() as s:
            await s.execute(update(audit_entries).where(at(org_id, seq)).values(**values))

    return tamper


def shift_time(seq: int) -> Tamper:
    async def tamper(db: Database, org_id: str) -> None:
        row = await _row(db, org_id, seq)
        await set_fields(seq, created_at=row.created_at - timedelta(hours=1))(db, org_id)

    return tamper


def delete_row(seq: int) -> Tamper:
    async def tamper(db: Database, org_id: str) -> None:
        async with db.write() as s:
            await s.execute(delete(audit_entries).where(at(org_id, seq)))

    return tamper


def swap(a: int, b: int, fields: tuple[str, ...]) -> Tamper:
    """Exchange `fields` between the entries at seq a and seq b."""

    async def tamper(db: Database, org_id: str) -> None:
        row_a, row_b = await _row(db, org_id, a), await _row(db, org_id, b)
        async with db.write() as s:
            await s.execute(update(audit_entries).where(audit_entries.c.id == row_a.id)
                            .values({f: getattr(row_b, f) for f in fields}))
            await s.execute(update(audit_entries).where(audit_entries.c.id == row_b.id)
                            .values({f: getattr(row_a, f) for f in fields}))

    return tamper


def rewrite_and_rehash(seq: int) -> Tamper:
    """Turn a refusal into a success and recompute its hash, every later leaf, the tree and the head, as an
    attacker who knows the formulas (but not the master secret) would."""

    async def tamper(db: Database, org_id: str) -> None:
        row = await _row(db, org_id, seq)
        forged = content_hash({**content_of(row), "outcome": "allowed", "error_code": None})
        await set_fields(seq, outcome="allowed", error_code=None, entry_hash=forged)(db, org_id)
        await rebuild_head(db, org_id)

    return tamper


async def rebuild_head(db: Database, org_id: str) -> None:
    """Make the head describe the tree of whatever entries are left (without the signing key, of course)."""
    async with db.write() as s:
        rows = (await s.execute(select(audit_entries.c.seq, audit_entries.c.entry_hash)
                                .where(audit_entries.c.organization_id == org_id)
                                .order_by(audit_entries.c.seq))).all()
        tree = Frontier()
        for seq, entry_hash in rows:
            tree.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == org_id).values(
            tree_size=tree.size, root=tree.root().hex(), frontier=tree.to_hex()))


def delete_tail_and_rebuild_head(first: int) -> Tamper:
    async def tamper(db: Database, org_id: str) -> None:
        async with db.write() as s:
            await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == org_id,
                                                        audit_entries.c.seq >= first))
        await rebuild_head(db, org_id)

    return tamper


async def delete_whole_log(db: Database, org_id: str) -> None:
    async with db.write() as s:
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == org_id))
        await s.execute(delete(audit_heads).where(audit_heads.c.organization_id == org_id))


async def empty_the_log(db: Database, org_id: str) -> None:
    """Delete every entry and set the head back to an empty tree."""
    async with db.write() as s:
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == org_id))
    await rebuild_head(db, org_id)


# name: (tamper, first broken seq or None when no entry is to blame, whether first_broken_id is the id of the
# entry at that seq)
TAMPERINGS: dict[str, tuple[Tamper, int | None, bool]] = {
    "outcome of a middle entry": (set_fields(3, outcome="allowed"), 3, True),
    "error code of a middle entry": (set_fields(4, error_code=None), 4, True),
    "coordinate of a middle entry": (set_fields(2, coordinate=f"{PART}/delete"), 2, True),
    "detail of a middle entry": (set_fields(5, detail={"status": 200, "cost": 0}), 5, True),
    "actor of the last entry": (set_fields(N, actor_user_id=None), N, True),
    "timestamp of the first entry": (shift_time(1), 1, True),
    "hash of a middle entry": (set_fields(4, entry_hash="f" * 64), 4, True),
    "MAC of a middle entry": (set_fields(4, mac="0" * 64), 4, True),
    "MAC of a middle entry, not even ASCII": (set_fields(4, mac="\u00e9" * 64), 4, True),
    "hash of the last entry": (set_fields(N, entry_hash="a" * 64), N, True),
    "middle entry deleted": (delete_row(4), 4, False),
    "last entry deleted": (delete_row(N), N, False),
    "first entry deleted": (delete_row(1), 1, False),
    "two entries swapped whole": (swap(2, 3, (*BODY_FIELDS, "entry_hash", "mac")), 2, True),
    "two entries' hashed fields swapped": (swap(3, 4, BODY_FIELDS), 3, True),
    "middle entry rewritten, every later hash and the head recomputed": (rewrite_and_rehash(3), 3, True),
    "last entry rewritten, the head recomputed": (rewrite_and_rehash(N), N, True),
    "tail deleted, the head recomputed to match": (delete_tail_and_rebuild_head(5), None, False),
    "whole log deleted with its head": (delete_whole_log, None, False),
    "every entry deleted, the head set back to empty": (empty_the_log, None, False),
}


@dataclass
class Tampered:
    org: Organization
    ids: dict[int, int]  # seq -> row id, before tampering
    result: CliResult


async def org_with_keys(db: Database, ws: Workspace, name: str) -> tuple[Organization, dict[str, str]]:
    """Another organization of the workspace's tenant, with the workspace's owner and viewer and a key each."""
    keys: dict[str, str] = {}
    async with db.write() as s:
        tenant = await s.get(Tenant, ws.tenant.id)
        assert tenant is not None
        org = await create_organization(s, tenant, name=name, keys=ledger_keys())
        for role in ("owner", "viewer"):
            user = await require_user(s, ws.emails[role])
            await add_to_organization(s, user, org, role=role)
            keys[role] = (await create_key(s, tenant=tenant, user=user, organization=org)).plaintext
    return org, keys


@pytest.fixture(scope="module")
async def tampered(app: Any, db: Database, database_url: str) -> dict[str, Tampered]:
    """One organization (one chain) per tampering, all tampered first, then each checked by its own
    `prism audit verify --org` process, several side by side (each process start costs most of a second)."""
    ws = await Factory(db).workspace(roles=("owner", "viewer"))
    cases: dict[str, tuple[Organization, dict[int, int]]] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        for number, (case, (tamper, _, _)) in enumerate(TAMPERINGS.items()):
            org, keys = await org_with_keys(db, ws, f"Case {number}")
            await record_calls(client, lambda role, keys=keys: {"Authorization": f"Bearer {keys[role]}",
                                                                "Host": ws.host})
            cases[case] = org, {r.seq: r.id for r in await ledger_rows(db, org.id)}
            await tamper(db, org.id)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = pool.map(lambda org: verify(database_url, ws, "--org", org.id, "--json"),
                           [org for org, _ in cases.values()])
        return {case: Tampered(org, ids, result)
                for (case, (org, ids)), result in zip(cases.items(), results, strict=True)}


@pytest.mark.parametrize("case", list(TAMPERINGS))
def test_tampering_is_detected_at_the_first_broken_entry(tampered: dict[str, Tampered], case: str) -> None:
    _, broken_seq, names_row = TAMPERINGS[case]
    org, ids, result = tampered[case].org, tampered[case].ids, tampered[case].result
    assert sorted(ids) == list(range(1, N + 1))
    assert result.returncode == 1, str(result)
    assert result.json["valid"] is False and len(result.json["logs"]) == 1
    chain = chain_of(result, org.id)
    assert chain["valid"] is False
    assert chain["first_broken_seq"] == broken_seq, chain
    assert chain["reason"], chain
    if names_row:
        assert chain["first_broken_id"] == ledger_keys().entry_ref(org.id, ids[broken_seq]), chain


async def test_only_the_tampered_organization_is_reported_broken(
        database_url: str, db: Database, client: httpx.AsyncClient, factory: Factory, ws: Workspace) -> None:
    second = await factory.second_org(ws)
    await factory.add_key(ws, "second", org=second)
    for _ in range(3):
        r = await client.post(TOOL, headers=ws.headers("second"), json={
            "app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}})
        assert r.status_code == 200, r.text
    await seal_waiting(db, second.id)
    await set_fields(2, outcome="refused")(db, ws.org.id)

    result = verify(database_url, ws, "--json")
    assert result.returncode == 1, str(result)
    assert chain_of(result, ws.org.id)["first_broken_seq"] == 2
    assert chain_of(result, second.id) == {
        "organization": second.slug, "organization_id": second.id, "tree_size": 3, "checked": 3, "waiting": 0,
        "since": 0, "valid": True, "first_broken_seq": None, "first_broken_id": None, "reason": None}

    only_second = verify(database_url, ws, "--org", second.slug, "--json")
    assert only_second.returncode == 0, str(only_second)
    assert [c["organization_id"] for c in only_second.json["logs"]] == [second.id]

    text = verify(database_url, ws, "--org", ws.org.id)
    assert text.returncode == 1, str(text)
    assert "BROKEN at entry 2" in text.stdout and TRACEBACK not in text.stderr, str(text)
