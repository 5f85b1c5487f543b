"""Does Prism's memory level off as distinct credentials and requests pile up? Resident memory by phase.

    python bench/memory_soak.py [--steps 50,100,200,400,800] [--long-calls 50000] [--handlers 10000]
    python bench/memory_soak.py --in-process [--steps ...]    # tracemalloc: what each phase's growth is

Prism runs with bench/synthetic_app.py's 10,000 handlers (`prism serve`, one worker, a fresh SQLite file; or the
ASGI app in this process with `--in-process`). Credentials are made in phases until `--steps` distinct ones have
been used (50, then 100, ...): API keys of the four built-in roles (scope sets, tool surfaces and personas
varied), API keys of custom roles that each see two apps of their own (a view, a tool list and a descriptor of
their own), and OAuth access tokens, each of its own grant (per-app scopes varied, one client per ten grants).
Each new credential asks for the tool catalog, the tenant descriptor (gzip), MCP initialize and tools/list, one
capability search (its own wording) and one governed call. Then the first credentials come back (nothing new
should be kept), `--organizations` new organizations use a key each, and one credential makes `--long-calls`
requests: governed calls, with a capability search of its own wording every fifth. VmRSS (the server's, or this
process's) is read after each phase, after a full garbage collection in-process; `--in-process` also compares
tracemalloc snapshots between phases and prints the allocation sites whose memory grew most.

Credentials are written straight into the database beside the running server (users with a placeholder password
hash, which no request here checks), as `prism key create` would: one process instead of one per key.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import uvloop
from sqlalchemy import select

from bench.harness import bench_env, machine, proc_memory_kib, start_prism, write_result
from bench.synthetic_app import APPS, ENTITIES, specs
from prism.config import Settings
from prism.governance.models import Persona
from prism.keys.service import create_key
from prism.ledger.keys import LedgerKeys
from prism.models import Membership, Organization, Role, Tenant, User
from prism.oauth.keys import KeyRing
from prism.oauth.models import OAuthClient, OAuthGrant, OAuthGrantOrganization
from prism.oauth.tokens import issue_access_token
from prism.seed import DEMO_SUBDOMAIN
from prism.storage import Database
from prism.tenancy.service import create_organization

SECRET = "memory-soak-master-secret-not-for-production-0123456789"  # noqa: S105 - a throwaway deployment's
RAISED = {f"rate_limit_{tier}": 10**9 for tier in
          ("anonymous", "authenticated", "admin", "auth_endpoints", "mcp", "key_registration")}
BUILTIN = ("owner", "admin", "member", "viewer")
SCOPE_SETS = ("mcp:read mcp:write mcp:execute", "mcp:read", "mcp:read mcp:write", "mcp:read mcp:execute")
MCP_PATH = "/api/mcp/sse"
MCP_VERSION = "2025-06-18"
APP_NAMES = list(APPS)
SEARCHES = ("list open {e} records", "approve the {e} waiting since {n}", "how many {e} were created in week {n}",
            "close {e} number {n}", "who changed {e} {n} yesterday", "summary of {e} by status for team {n}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", default="50,100,200,400,800", help="distinct credentials used by the end of each phase")
    p.add_argument("--organizations", type=int, default=200,
                   help="then this many new organizations, one owner's key each (per-organization state)")
    p.add_argument("--long-calls", type=int, default=50_000, help="requests of one credential in the last phase")
    p.add_argument("--handlers", type=int, default=10_000)
    p.add_argument("--in-process", action="store_true", help="drive the ASGI app here, with tracemalloc")
    p.add_argument("--frames", type=int, default=6, help="tracemalloc frames kept per allocation (--in-process)")
    return p.parse_args()


@dataclass
class Credential:
    kind: str  # role | custom | oauth
    token: str
    app: str  # an app whose read handlers it may call
    entity: str


@dataclass
class Workspace:
    tenant: Tenant
    organization: Organization
    roles: dict[str, Role]
    issuer: str
    ring: KeyRing
    ledger_keys: LedgerKeys
    clients: list[str] = field(default_factory=list)


def entity_of(app_index: int) -> str:
    """The first entity synthetic_app gives the app (every app has at least one)."""
    return ENTITIES[(app_index * 7) % len(ENTITIES)]


def apps_of(i: int) -> tuple[int, int]:
    """Two distinct apps for the i-th custom role: 780 pairs, so each custom role sees a view of its own."""
    pairs = [(a, b) for a in range(len(APP_NAMES)) for b in range(a + 1, len(APP_NAMES))]
    return pairs[(i * 37) % len(pairs)]


async def workspace(db: Database, settings: Settings, issuer: str) -> Workspace:
    async with db.read() as session:
        tenant = (await session.execute(select(Tenant).where(Tenant.subdomain == DEMO_SUBDOMAIN))).scalar_one()
        org = (await session.execute(select(Organization).where(Organization.tenant_id == tenant.id))).scalars().first()
        roles = {r.name: r for r in (await session.execute(select(Role).where(Role.tenant_id == tenant.id))).scalars()}
    assert org is not None
    return Workspace(tenant, org, roles, issuer, KeyRing(db, settings), LedgerKeys(settings))


async def make_credentials(db: Database, ws: Workspace, first: int, count: int) -> list[Credential]:
    """Credentials `first` .. `first + count - 1`: every third an API key of a built-in role, a custom role's
    API key, an OAuth token of its own grant."""
    made: list[Credential] = []
    grants: list[tuple[int, OAuthGrant]] = []
    async with db.write() as session:
        for i in range(first, first + count):
            kind = ("role", "custom", "oauth")[i % 3]
            if kind == "custom":
                a, b = apps_of(i)
                role = Role(tenant_id=ws.tenant.id, name=f"soak_{i}", is_builtin=False,
                            permissions=[f"{APP_NAMES[a]}.*", f"{APP_NAMES[b]}.*"])
                session.add(role)
                await session.flush()
                app_index = a
            else:
                role = ws.roles[BUILTIN[(i // 3) % len(BUILTIN)]]
                app_index = i % len(APP_NAMES)
            user = User(email=f"soak{i}@example.com", password_hash="!")  # noqa: S106 - never checked here
            session.add(user)
            await session.flush()
            session.add(Membership(user_id=user.id, organization_id=ws.organization.id, role_id=role.id))
            await session.flush()
            if kind == "oauth":
                grants.append((len(made), await _oauth_grant(session, ws, user, i, APP_NAMES[app_index])))
                token = ""  # signed once the grant is committed (the key ring may read the database)
            else:
                minted = await create_key(session, tenant=ws.tenant, user=user, organization=ws.organization,
                                          name=f"soak {i}", scopes=SCOPE_SETS[i % len(SCOPE_SETS)],
                                          prefix="mcp", tool_surface=("mega", "split")[i % 2])
                if i % 2 == 0:  # half the keys under a persona of their own (allow by default)
                    persona = Persona(organization_id=ws.organization.id, tenant_id=ws.tenant.id, name=f"soak {i}",
                                      description="", allow=[], deny=[], oversight=[], default_effect="allow",
                                      cost_cap=None, oversight_priority="normal", oversight_sla_seconds=3600,
                                      require_mission=False, version=1)
                    session.add(persona)
                    await session.flush()
                    minted.key.persona_id = persona.id
                token = minted.plaintext
            made.append(Credential(kind, token, APP_NAMES[app_index], entity_of(app_index)))
    for index, grant in grants:
        made[index].token = await issue_access_token(
            ws.ring, issuer=ws.issuer, subject=grant.user_id, audience=ws.issuer, client_id=grant.client_id,
            scope=grant.scope, organization_id=ws.organization.id, grant_id=grant.id, lifetime=24 * 3600)
    return made


async def _oauth_grant(session: Any, ws: Workspace, user: User, i: int, app: str) -> OAuthGrant:
    if not ws.clients or i % 30 == 2:  # one client per ten OAuth grants
        client_id = f"soak-client-{i}"
        session.add(OAuthClient(client_id=client_id, client_name=f"Soak client {i}",
                                redirect_uris=["http://127.0.0.1/callback"],
                                grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                token_endpoint_auth_method="none",  # noqa: S106 - a public client
                                scope=None, extra={}, secret_hash=None,
                                fingerprint=hashlib.sha256(client_id.encode()).hexdigest()))
        ws.clients.append(client_id)
    scope = f"mcp:read {app}.add"  # per-app scopes vary what each grant sees
    grant = OAuthGrant(client_id=ws.clients[-1], user_id=user.id, organization_id=ws.organization.id, scope=scope,
                       issuer=ws.issuer, audience=ws.issuer)
    session.add(grant)
    await session.flush()
    session.add(OAuthGrantOrganization(grant_id=grant.id, organization_id=ws.organization.id))
    return grant


async def organization_keys(db: Database, ws: Workspace, first: int, count: int) -> list[Credential]:
    """`count` new organizations of the tenant, each with an owner and the owner's API key."""
    made = []
    async with db.write() as session:
        for i in range(first, first + count):
            org = await create_organization(session, ws.tenant, name=f"Soak organization {i}", keys=ws.ledger_keys)
            user = User(email=f"soak-org{i}@example.com", password_hash="!")  # noqa: S106 - never checked here
            session.add(user)
            await session.flush()
            session.add(Membership(user_id=user.id, organization_id=org.id, role_id=ws.roles["owner"].id))
            await session.flush()
            minted = await create_key(session, tenant=ws.tenant, user=user, organization=org, name=f"soak org {i}",
                                      prefix="mcp")
            app_index = i % len(APP_NAMES)
            made.append(Credential("organization", minted.plaintext, APP_NAMES[app_index], entity_of(app_index)))
    return made


def search_query(n: int) -> str:
    return SEARCHES[n % len(SEARCHES)].format(e=ENTITIES[n % len(ENTITIES)].replace("_", " "), n=n)


async def governed_call(client: httpx.AsyncClient, cred: Credential, n: int, statuses: Counter[str]) -> None:
    response = await client.post("/api/mcp/tools/prism_entity_crud/", headers=_bearer(cred), json={
        "app": cred.app, "entity": cred.entity, "operation": "read", "arguments": {"id": f"rec-{n}"}})
    statuses[f"call {response.status_code}"] += 1


async def every_door(client: httpx.AsyncClient, cred: Credential, n: int, statuses: Counter[str]) -> None:
    """What a new agent does: catalog, descriptor, MCP handshake and tool list, one search, one governed call."""
    auth = _bearer(cred)
    statuses[f"tools {(await client.get('/api/v1/dev/tools/', headers=auth)).status_code}"] += 1
    descriptor = await client.get("/.well-known/openapi.json", headers={**auth, "Accept-Encoding": "gzip"})
    statuses[f"descriptor {descriptor.status_code}"] += 1
    mcp = {**auth, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = await client.post(MCP_PATH, headers=mcp, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": MCP_VERSION, "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}})
    statuses[f"mcp initialize {init.status_code}"] += 1
    session = {"mcp-session-id": init.headers.get("mcp-session-id", ""), "mcp-protocol-version": MCP_VERSION}
    listed = await client.post(MCP_PATH, headers={**mcp, **session},
                               json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    statuses[f"mcp tools/list {listed.status_code}"] += 1
    search = await client.get("/api/v1/dev/introspect/", headers=auth,
                              params={"dimension": "capability_search", "query": search_query(n)})
    statuses[f"search {search.status_code}"] += 1
    await governed_call(client, cred, n, statuses)


def _bearer(cred: Credential) -> dict[str, str]:
    return {"Authorization": f"Bearer {cred.token}"}


class Meter:
    """Resident memory of the measured process, and (in-process) tracemalloc's growth between phases."""

    def __init__(self, pid: int, traced: bool) -> None:
        self.pid = pid
        self.traced = traced
        self.snapshot: tracemalloc.Snapshot | None = None
        self.rows: list[dict[str, Any]] = []

    def read(self, phase: str, credentials: int, requests: int, seconds: float) -> dict[str, Any]:
        if self.traced:
            gc.collect()
        kib = proc_memory_kib(self.pid)
        row: dict[str, Any] = {"phase": phase, "credentials": credentials, "requests": requests,
                               "seconds": round(seconds, 1), "rss_mb": round(kib["VmRSS"] / 1024, 1),
                               "peak_mb": round(kib["VmHWM"] / 1024, 1)}
        if self.traced:
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")])
            row["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
            if self.snapshot is not None:
                row["growth"] = [  # a traceback's frames run from the oldest kept to where it was allocated
                    {"kib": round(stat.size_diff / 1024, 1), "blocks": stat.count_diff,
                     "stack": [str(frame) for frame in reversed(stat.traceback)]}
                    for stat in snapshot.compare_to(self.snapshot, "traceback")[:12]]
            self.snapshot = snapshot
        self.rows.append(row)
        growth = "".join(f"\n    {g['kib']:+9.1f} KiB {g['blocks']:+7d} blocks  {' <- '.join(g['stack'][:3])}"
                         for g in row.get("growth", [])[:8])
        print(f"{phase:>24}: {credentials:4d} credentials, {requests:6d} requests, RSS {row['rss_mb']} MB "
              f"(peak {row['peak_mb']} MB){' traced ' + str(row['traced_mb']) + ' MB' if self.traced else ''}"
              f"{growth}", flush=True)
        return row


async def soak(client: httpx.AsyncClient, db: Database, ws: Workspace, meter: Meter,
               args: argparse.Namespace) -> dict[str, Any]:
    statuses: Counter[str] = Counter()
    credentials: list[Credential] = []
    requests = 0
    # Warm: the first view of each kind built once, so the first phase measures credentials, not start-up.
    for cred in await make_credentials(db, ws, 10**6, 3):
        await every_door(client, cred, 0, statuses)
    meter.read("warm", 0, requests, 0)
    for step in (int(s) for s in args.steps.split(",")):
        start = time.perf_counter()
        new = await make_credentials(db, ws, len(credentials), step - len(credentials))
        for cred in new:
            await every_door(client, cred, len(credentials), statuses)
            credentials.append(cred)
            requests += 6
        meter.read(f"{step} distinct", len(credentials), requests, time.perf_counter() - start)
    start = time.perf_counter()
    for n, cred in enumerate(credentials[:50]):
        await every_door(client, cred, n, statuses)
        requests += 6
    meter.read("first 50 again", len(credentials), requests, time.perf_counter() - start)
    if args.organizations:
        start = time.perf_counter()
        for n, cred in enumerate(await organization_keys(db, ws, 0, args.organizations)):
            await every_door(client, cred, n, statuses)
            credentials.append(cred)
            requests += 6
        meter.read(f"{args.organizations} organizations", len(credentials), requests, time.perf_counter() - start)
    one = credentials[0]
    start = time.perf_counter()
    for n in range(1, args.long_calls + 1):
        if n % 5 == 0:
            search = await client.get("/api/v1/dev/introspect/", headers=_bearer(one),
                                      params={"dimension": "capability_search", "query": search_query(10**5 + n)})
            statuses[f"search {search.status_code}"] += 1
        else:
            await governed_call(client, one, n, statuses)
        requests += 1
        if n % 10_000 == 0 or n == args.long_calls:
            meter.read(f"one key, {n} calls", len(credentials), requests, time.perf_counter() - start)
    return {"phases": meter.rows, "statuses": dict(sorted(statuses.items()))}


async def run_server(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    url = f"sqlite:///{workdir / 'prism.db'}"
    extra = {"PRISM_APPS": specs(), "PRISM_BENCH_HANDLERS": str(args.handlers), "PRISM_SECRET_KEY": SECRET}
    server, banner = start_prism(database_url=url, cwd=workdir, log_path=workdir / "prism.log", extra_env=extra)
    db = Database(url)
    try:
        server.wait_ready(timeout=300)
        settings = Settings(database_url=url, secret_key=SECRET)
        ws = await workspace(db, settings, f"http://127.0.0.1:{server.port}")
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            return await soak(client, db, ws, Meter(server.pid, traced=False), args)
    finally:
        await db.dispose()
        server.stop()
        del banner


async def run_in_process(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from bench.dispatch_breakdown import prepare
    from prism.app import create_app

    os.environ.update(bench_env(PRISM_APPS=specs(), PRISM_BENCH_HANDLERS=str(args.handlers)))
    os.chdir(workdir)  # the master secret file `prepare` and the app share is made there, as `prism serve` does
    url, _, _ = await prepare(workdir)
    # The master secret of `prepare`'s seed (a file in the working directory), so the ledger's keys match.
    settings = Settings(database_url=url, apps=specs(), log_level="warning", **RAISED)
    app = create_app(settings)
    db = Database(url)
    tracemalloc.start(args.frames)
    try:
        async with app.router.lifespan_context(app):
            ws = await workspace(db, settings, "http://127.0.0.1:8000")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=120) as client:
                return await soak(client, db, ws, Meter(os.getpid(), traced=True), args)
    finally:
        tracemalloc.stop()
        await db.dispose()


def main() -> None:
    args = parse_args()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    with tempfile.TemporaryDirectory(prefix="prism-soak-") as tmp:
        runner = run_in_process if args.in_process else run_server
        result = uvloop.run(runner(args, Path(tmp)))
    mode = "in-process" if args.in_process else "server"
    path = write_result(f"memory-soak-{mode}-{stamp}", {
        "benchmark": "memory_soak", "mode": mode, "started_at": stamp, "machine": machine(),
        "settings": {"steps": args.steps, "organizations": args.organizations, "long_calls": args.long_calls,
                     "handlers": args.handlers}, **result})
    print("\n| phase | distinct credentials | requests | s | VmRSS MB | peak MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in result["phases"]:
        print(f"| {row['phase']} | {row['credentials']} | {row['requests']} | {row['seconds']} | {row['rss_mb']} "
              f"| {row['peak_mb']} |")
    print(f"answers: {result['statuses']}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
