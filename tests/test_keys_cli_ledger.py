"""`prism key create|revoke` (a real process on the test database) go through the keys handlers like every other
path: each mint and revoke, allowed or refused, is an entry of the key's organization's ledger (door `cli`,
credential `operator:<id of the run>`, the holder as actor), sealed by the command itself, and the log still
verifies through the API and with `prism audit verify`. Minting takes the holder's `keys.add_key`; revoking is
the operator's whatever the holder's role, even after they left the organization."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import delete, select

from prism.models import Membership, User
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok
from tests.processes import TRACEBACK, CliResult, run_cli
from tests.test_keys_governed_paths import CREATE, REVOKE, _give_role

LIST, VERIFY = "audit_query/ledger/entry/list", "audit_query/ledger/log/verify"


async def cli(database_url: str, *args: str) -> CliResult:
    result = await asyncio.to_thread(run_cli, *args, "--json", database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    return result


async def key_entries(client: httpx.AsyncClient, ws: Workspace, actor: str) -> list[dict[str, Any]]:
    """The organization's ledger entries of the keys handlers made for `actor`, oldest first, read through the
    ledger API by the organization's owner."""
    page = await ok(client, ws, LIST, {"actor": actor, "page_size": 100})
    return [e for e in reversed(page["items"]) if e["coordinate"] in (CREATE, REVOKE)]


async def assert_log_verifies(client: httpx.AsyncClient, database_url: str, ws: Workspace) -> None:
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is True and report["reason"] is None, report
    verified = await cli(database_url, "audit", "verify", "--tenant", ws.tenant.subdomain)
    assert verified.returncode == 0, str(verified)
    [chain] = [c for c in verified.json["logs"] if c["organization_id"] == ws.org.id]
    assert chain["valid"] is True, verified.json


async def test_a_cli_mint_and_revoke_are_sealed_ledger_entries_of_the_keys_organization(
        client: httpx.AsyncClient, factory: Factory, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    other = await factory.workspace(roles=("owner", "member"))
    member = ws.emails["member"]
    minted = await cli(database_url, "key", "create", "--tenant", ws.tenant.subdomain, "--email", member,
                       "--org", ws.org.slug, "--name", "build agent", "--scopes", "mcp:read")
    assert minted.returncode == 0, str(minted)
    plaintext = minted.json["api_key"]
    assert plaintext.startswith("mcp_") and minted.json["scopes"] == ["mcp:read"]
    as_key = {"Authorization": f"Bearer {plaintext}", "Host": ws.host}
    assert (await client.get("/api/v1/dev/me/", headers=as_key)).status_code == 200
    # Another tenant's operator command does not find the key, and writes nothing anywhere.
    elsewhere = await cli(database_url, "key", "revoke", minted.json["key_prefix"], "--tenant", other.tenant.subdomain)
    assert elsewhere.returncode == 1 and elsewhere.error["error"] == "key_not_found", str(elsewhere)
    revoked = await cli(database_url, "key", "revoke", minted.json["key_prefix"], "--tenant", ws.tenant.subdomain)
    assert revoked.returncode == 0 and revoked.json["revoked_at"], str(revoked)
    assert (await client.get("/api/v1/dev/me/", headers=as_key)).status_code == 401

    entries = await key_entries(client, ws, member)
    assert [(e["coordinate"], e["outcome"], e["door"], e["actor_email"]) for e in entries] == [
        (CREATE, "allowed", "cli", member), (REVOKE, "allowed", "cli", member)]
    assert all(e["credential_id"].startswith("operator:") and e["sealed"] for e in entries), entries
    assert entries[0]["credential_id"] != entries[1]["credential_id"]  # each run is named apart
    assert plaintext not in str(entries) and plaintext[4:] not in str(entries)
    assert await key_entries(client, other, member) == []
    await assert_log_verifies(client, database_url, ws)


async def test_the_holders_role_decides_a_cli_mint_and_never_stops_a_cli_revoke(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    await _give_role(db, ws, "member", "auditor", ["*.view_*"])  # deliberately without keys.add_key/change_key
    member, viewer = ws.emails["member"], ws.emails["viewer"]
    refused = await cli(database_url, "key", "create", "--tenant", ws.tenant.subdomain, "--email", member)
    assert refused.returncode == 1 and refused.error["error"] == "permission_denied", str(refused)
    assert "keys.add_key" in refused.error["message"] and refused.stdout == ""
    own_key = ws.keys["member"][:15]
    ended = await cli(database_url, "key", "revoke", own_key, "--tenant", ws.tenant.subdomain)
    assert ended.returncode == 0, str(ended)
    assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 401
    assert [(e["coordinate"], e["outcome"], e["error_code"], e["door"]) for e in
            await key_entries(client, ws, member)] == [(CREATE, "refused", "permission_denied", "cli"),
                                                      (REVOKE, "allowed", None, "cli")]

    # A holder who left the organization: their key is still the operator's to revoke, on the record.
    async with db.write() as session:
        viewer_id = (await session.execute(select(User.id).where(User.email == viewer))).scalar_one()
        await session.execute(delete(Membership).where(Membership.user_id == viewer_id))
    gone = await cli(database_url, "key", "revoke", ws.keys["viewer"][:15], "--tenant", ws.tenant.subdomain)
    assert gone.returncode == 0, str(gone)
    assert [(e["coordinate"], e["outcome"]) for e in await key_entries(client, ws, viewer)] == [(REVOKE, "allowed")]
    await assert_log_verifies(client, database_url, ws)
