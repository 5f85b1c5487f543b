"""Secrets never appear where they are not shown on purpose: a real `prism serve` (logging at debug level) goes
through every flow that creates or uses a secret, with distinctive values, and then every table row, every log
line, /metrics, every answer read back, the OpenAPI descriptors, the ledger's export and what webhook receivers
got are searched for each secret, as written and base64- or URL-encoded. A secret that is shown once (an API
key, an OAuth client secret, a webhook secret at creation or rotation) is shown exactly then."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
import yaml
from sqlalchemy import inspect as schema_of
from sqlalchemy import literal_column, select
from sqlalchemy import table as table_named
from starlette.requests import Request
from starlette.responses import Response

from prism.storage import one_shot_engine
from tests.factories import PASSWORD, Factory, Workspace
from tests.integrations_upstream import RunningService, SpecService, _json
from tests.live_prism import GENEROUS_LIMITS
from tests.oauth_support import CLIENT_BODIES, OAUTH, offered_organizations, pkce, query_of
from tests.oauth_support import field as form_field
from tests.processes import (
    TEST_SECRET_KEY_FILE,
    TRACEBACK,
    Server,
    ServerPool,
    _in_thread,
    clean_env,
    prism_command,
    query,
    run_cli,
)
from tests.webhooks_receiver import Receiver, RunningReceiver, TlsFiles, make_tls

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
HOOKS = "/api/v1/risk-assessment/governance/webhooks/"


def encodings(secret: str) -> set[str]:
    """The forms a secret could take on its way somewhere: as written, base64 (standard and URL-safe, with and
    without padding), percent-encoded."""
    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret)}
    for b64 in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms |= {b64, b64.rstrip("=")}
    return forms


@dataclass
class Trail:
    """What a run went through: its secrets by name, and every text Prism gave back, by where it was read."""

    secrets: dict[str, str] = field(default_factory=dict)
    shown: list[tuple[str, str]] = field(default_factory=list)  # (where, text) of answers that may show one
    answers: list[tuple[str, str]] = field(default_factory=list)  # (where, text) of answers that must show none

    def secret(self, name: str, value: str) -> str:
        self.secrets[name] = value
        return value

    def found_in(self, text: str) -> list[str]:
        return sorted(name for name, value in self.secrets.items() if any(f in text for f in encodings(value)))


class EchoingService(SpecService):
    """The warehouse service, which may answer any call with an error that echoes the request's headers (as
    some gateways and debugging endpoints do)."""

    echo_status: int | None = None

    async def handle(self, request: Request) -> Response:
        if self.echo_status is not None:
            return _json(self.echo_status, {"error": "denied", "request_headers": dict(request.headers)})
        return await super().handle(request)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("secrets-tls"))


@pytest.fixture(scope="module")
async def receiver(tls: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(tls)
    yield await running.start()
    await running.stop()


@pytest.fixture(scope="module")
async def upstream(tls: TlsFiles) -> AsyncIterator[EchoingService]:
    running = RunningService(EchoingService(yaml.safe_load(WAREHOUSE.read_text()), base_path="/v2"), tls)
    yield await running.start()  # type: ignore[misc]
    await running.stop()


@pytest.fixture(scope="module")
def server(database_url: str, tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pool = ServerPool(tmp_path_factory.mktemp("secrets-serve"))
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_LOG_LEVEL="debug",
                    PRISM_LOG_FORMAT="json", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_WEBHOOK_WORKER_IN_PROCESS="true", PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
                    PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca), **GENEROUS_LIMITS)
    try:
        yield pool.start("--workers", "1", env=env)
    finally:
        pool.stop_all()


async def call(http: httpx.AsyncClient, ws: Workspace, path: str, arguments: Any, *,
               key: str | None = None) -> httpx.Response:
    mega, app, entity, operation = path.split("/")
    return await http.post(f"/api/mcp/tools/prism_{mega}/", headers={
        "Authorization": f"Bearer {key or ws.keys['owner']}", "Host": ws.host},
        json={"app": app, "entity": entity, "operation": operation, "arguments": arguments})


@pytest.fixture(scope="module")
async def trail(server: Server, db: Any, receiver: Receiver, upstream: EchoingService,
                database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Trail:
    factory = Factory(db)
    ws = await factory.workspace(roles=("owner",))
    run = Trail()
    run.secret("api key", ws.keys["owner"])
    run.secret("password", PASSWORD)
    run.secret("master secret", TEST_SECRET_KEY_FILE.read_text().strip())
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        await keys_flows(http, ws, run)
        await oauth_flows(http, ws, run)
        await webhook_flows(http, ws, run, receiver)
        await integration_flows(http, ws, run, upstream)
        await read_everything(http, ws, run)
        await asyncio.to_thread(cli_flows, database_url, ws, run, tmp_path_factory.mktemp("secrets-cli"))
        changed = await http.post("/api/mcp/api-keys/register/", headers={"Host": ws.host}, json={
            "email": ws.emails["owner"], "password": run.secrets["changed password"]})
        assert changed.status_code == 201, changed.text  # the password the CLI read is the one now in force
        run.secret("key registered with the changed password", changed.json()["api_key"])
    return run


def cli_flows(database_url: str, ws: Workspace, run: Trail, directory: Path) -> None:
    """The commands that print or take secrets; what they print is kept like an answer."""
    minted = run_cli("key", "create", "--tenant", ws.tenant.subdomain, "--email", ws.emails["owner"], "--json",
                     database_url=database_url)
    assert minted.returncode == 0, str(minted)
    run.shown.append(("prism key create", minted.stdout))
    run.secret("cli key", minted.json["api_key"])
    password = run.secret("changed password", "changed-Pa55-" + uuid.uuid4().hex)
    changed = subprocess.run([*prism_command(), "user", "set-password", "--tenant", ws.tenant.subdomain, "--email",
                              ws.emails["owner"], "--password-stdin", "--json"], input=password + "\n",
                             capture_output=True, text=True, env=clean_env(PRISM_DATABASE_URL=database_url),
                             timeout=60, check=False)
    assert changed.returncode == 0, changed.stderr
    run.answers.append(("prism user set-password", changed.stdout + changed.stderr))
    archive = directory / "ledger.jsonl"
    [last] = query(database_url, "SELECT max(seq) AS seq FROM audit_entries WHERE organization_id = :o",
                   o=ws.org.id)
    archived = run_cli("audit", "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.id, "--through",
                       str(last["seq"]), "--out", str(archive), "--json", database_url=database_url)
    assert archived.returncode == 0, str(archived)
    run.answers.append(("prism audit archive", archived.stdout + archived.stderr + archive.read_text()))


async def keys_flows(http: httpx.AsyncClient, ws: Workspace, run: Trail) -> None:
    host = {"Host": ws.host}
    registered = await http.post("/api/mcp/api-keys/register/", headers=host,
                                 json={"email": ws.emails["owner"], "password": PASSWORD, "name": "probe"})
    assert registered.status_code == 201, registered.text
    run.shown.append(("key registration", registered.text))
    run.secret("registered key", registered.json()["api_key"])
    wrong = run.secret("wrong password", "wr0ng-Pa55w0rd-" + uuid.uuid4().hex)
    refused = await http.post("/api/mcp/api-keys/register/", headers=host,
                              json={"email": ws.emails["owner"], "password": wrong})
    run.answers.append(("registration refused", refused.text))
    forged = run.secret("forged key", "mcp_" + uuid.uuid4().hex + "forged")
    for door in ("/api/v1/dev/me/", "/api/mcp/tools/"):
        answer = await http.get(door, headers={**host, "Authorization": f"Bearer {forged}"})
        run.answers.append((f"forged key at {door}", answer.text))


async def oauth_flows(http: httpx.AsyncClient, ws: Workspace, run: Trail) -> None:
    host = {"Host": ws.host}
    registered = await http.post(f"{OAUTH}/register/", headers=host, json=CLIENT_BODIES["chatgpt"])
    assert registered.status_code == 201, registered.text
    run.shown.append(("client registration", registered.text))
    client = registered.json()
    run.secret("client secret", client["client_secret"])
    verifier, challenge = pkce()
    run.secret("pkce verifier", verifier)
    redirect_uri = client["redirect_uris"][0]
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect_uri,
              "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"}
    async with httpx.AsyncClient(base_url=http.base_url, timeout=30) as browser:
        page = await browser.get(f"{OAUTH}/authorize/", params=params, headers=host)
        next_path = query_of(page.headers["location"])["next"]
        login = await browser.get("/login/", params={"next": next_path}, headers=host)
        wrong = await browser.post("/login/", headers=host, data={
            "csrf_token": form_field(login.text, "csrf_token"), "next": next_path, "email": ws.emails["owner"],
            "password": run.secrets["wrong password"]})
        run.answers.append(("sign-in refused", wrong.text))
        signed = await browser.post("/login/", headers=host, data={
            "csrf_token": form_field(login.text, "csrf_token"), "next": next_path, "email": ws.emails["owner"],
            "password": PASSWORD})
        assert signed.status_code == 303, signed.text
        for name, value in browser.cookies.items():
            run.secret(f"cookie {name}", value)
        page = await browser.get(signed.headers["location"], headers=host)
        form = {"csrf_token": form_field(page.text, "csrf_token"), "request": form_field(page.text, "request"),
                "decision": "allow"}
        form.update({f"organization:{o}": "yes" for o in offered_organizations(page.text)[:1]})
        allowed = await browser.post(f"{OAUTH}/authorize/", headers=host, data=form)
        assert allowed.status_code == 303, allowed.text
        code = run.secret("authorization code", query_of(allowed.headers["location"])["code"])
        console = await browser.get("/console/", headers=host, follow_redirects=True)
        run.answers.append(("console", console.text))
    exchange = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "client_id": client["client_id"], "redirect_uri": redirect_uri}
    wrong_secret = run.secret("wrong client secret", "wrong-client-secret-" + uuid.uuid4().hex)
    refused = await http.post(f"{OAUTH}/token/", headers=host, data={**exchange, "client_secret": wrong_secret})
    run.answers.append(("token refused", refused.text))
    tokens = await http.post(f"{OAUTH}/token/", headers=host, data={**exchange,
                                                                    "client_secret": client["client_secret"]})
    assert tokens.status_code == 200, tokens.text
    run.shown.append(("token", tokens.text))
    run.secret("access token", tokens.json()["access_token"])
    run.secret("refresh token", tokens.json()["refresh_token"])
    me = await http.get("/api/v1/dev/me/", headers={**host, "Authorization": f"Bearer {tokens.json()['access_token']}"})
    run.answers.append(("me with a token", me.text))
    refreshed = await http.post(f"{OAUTH}/token/", headers=host, data={
        "grant_type": "refresh_token", "refresh_token": tokens.json()["refresh_token"],
        "client_id": client["client_id"], "client_secret": client["client_secret"]})
    assert refreshed.status_code == 200, refreshed.text
    run.shown.append(("refresh", refreshed.text))
    run.secret("refreshed access token", refreshed.json()["access_token"])
    run.secret("rotated refresh token", refreshed.json()["refresh_token"])
    reused = await http.post(f"{OAUTH}/token/", headers=host, data={
        "grant_type": "refresh_token", "refresh_token": tokens.json()["refresh_token"],
        "client_id": client["client_id"], "client_secret": client["client_secret"]})
    run.shown.append(("refresh reused within the grace window", reused.text))
    for token in (refreshed.json()["access_token"], refreshed.json()["refresh_token"]):
        revoked = await http.post(f"{OAUTH}/revoke/", headers=host, data={"token": token})
        run.answers.append(("revoke", revoked.text))
    again = await http.post(f"{OAUTH}/token/", headers=host, data={**exchange,
                                                                   "client_secret": client["client_secret"]})
    run.answers.append(("code replayed", again.text))
    again_registered = await http.post(f"{OAUTH}/register/", headers=host, json=CLIENT_BODIES["chatgpt"])
    run.answers.append(("client registered again", again_registered.text))


async def webhook_flows(http: httpx.AsyncClient, ws: Workspace, run: Trail, receiver: Receiver) -> None:
    headers = ws.headers()
    header_value = run.secret("webhook header", "hdr-value-" + uuid.uuid4().hex)
    created = await http.post(HOOKS, headers={**headers, "Idempotency-Key": "probe-hook-1"}, json={
        "name": "probe", "url": receiver.url("/probe"), "custom_headers": {"X-Receiver-Token": header_value}})
    assert created.status_code == 201, created.text
    run.shown.append(("webhook created", created.text))
    hook = created.json()
    run.secret("webhook secret", hook["secret"])
    replayed = await http.post(HOOKS, headers={**headers, "Idempotency-Key": "probe-hook-1"}, json={
        "name": "probe", "url": receiver.url("/probe"), "custom_headers": {"X-Receiver-Token": header_value}})
    run.shown.append(("webhook creation replayed", replayed.text))
    patched_secret = run.secret("patched webhook secret", "whk_secret_" + uuid.uuid4().hex + "PATCHED")
    patched = await http.patch(f"{HOOKS}{hook['id']}/", headers=headers, json={"secret": patched_secret})
    assert patched.status_code == 200, patched.text
    run.answers.append(("webhook patched", patched.text))
    bad = await http.patch(f"{HOOKS}{hook['id']}/", headers=headers, json={"secret": "whk_secret_ has space x"})
    run.answers.append(("webhook bad patch", bad.text))
    rotated = await call(http, ws, "config_manage/governance/webhook/rotate_secret", {"id": hook["id"]})
    assert rotated.status_code == 200, rotated.text
    run.shown.append(("webhook rotated", rotated.text))
    run.secret("rotated webhook secret", rotated.json()["data"]["secret"])
    tested = await http.post(f"{HOOKS}{hook['id']}/test/", headers=headers)
    run.answers.append(("webhook test", tested.text))
    await receiver.wait_for("/probe", 1, within=30)
    for what in ("", "deliveries/"):
        answer = await http.get(f"{HOOKS}{hook['id']}/{what}", headers=headers)
        run.answers.append((f"webhook {what}", answer.text))
    run.answers.append(("webhook list", (await http.get(HOOKS, headers=headers)).text))


async def integration_flows(http: httpx.AsyncClient, ws: Workspace, run: Trail, upstream: EchoingService) -> None:
    name = "probe_" + uuid.uuid4().hex[:8]
    imported = await call(http, ws, "config_manage/integrations/integration/importOpenapi",
                          {"name": name, "spec": WAREHOUSE.read_text()})
    assert imported.status_code == 200, imported.text
    token_url = f"https://127.0.0.1:{upstream.port}/oauth/token"
    upstream.access_token = run.secret("upstream access token", "upstream-at-" + uuid.uuid4().hex)
    kinds: list[dict[str, Any]] = [
        {"auth_kind": "api_key", "header": "X-API-Key", "secret": "api-key-" + uuid.uuid4().hex},
        {"auth_kind": "bearer", "secret": "bearer-" + uuid.uuid4().hex},
        {"auth_kind": "basic", "username": "svc-user", "secret": "basic-pw-" + uuid.uuid4().hex},
        {"auth_kind": "oauth2_client_credentials", "client_id": "probe-client", "token_url": token_url,
         "secret": "client-cred-" + uuid.uuid4().hex},
    ]
    for kind in kinds:
        secret = run.secret(f"integration {kind['auth_kind']}", kind["secret"])
        if kind["auth_kind"] == "basic":  # what goes on the wire: user:password, base64-encoded
            run.secret("integration basic pair", f"svc-user:{secret}")
        upstream.oauth_client = ("probe-client", secret)
        connected = await call(http, ws, "config_manage/integrations/connection/set",
                               {"name": name, "base_url": upstream.url(), **kind})
        assert connected.status_code == 200, connected.text
        run.answers.append((f"connection set {kind['auth_kind']}", connected.text))
        upstream.echo_status = None
        passed = await call(http, ws, f"integration_call/{name}/items/getItem", {"itemId": 1})
        assert passed.status_code == 200, passed.text
        upstream.echo_status = 403
        echoed = await call(http, ws, f"integration_call/{name}/items/getItem", {"itemId": 2})
        run.answers.append((f"upstream error echoing {kind['auth_kind']}", echoed.text))
        upstream.echo_status = 200
        echoed = await call(http, ws, f"integration_call/{name}/items/getItem", {"itemId": 3})
        run.answers.append((f"upstream answer echoing {kind['auth_kind']}", echoed.text))
        upstream.echo_status = None
    listed = await call(http, ws, "config_manage/integrations/connection/list", {})
    run.answers.append(("connection list", listed.text))
    logs = await call(http, ws, "report_query/integrations/call_log/list", {})
    run.answers.append(("call records", logs.text))


async def read_everything(http: httpx.AsyncClient, ws: Workspace, run: Trail) -> None:
    headers = ws.headers()
    for path in ("/.well-known/openapi.json", "/api/v1/dev/me/", "/api/v1/dev/tools/", "/metrics",
                 "/api/mcp/tools/", "/.well-known/oauth-authorization-server", "/.well-known/jwks.json"):
        run.answers.append((path, (await http.get(path, headers=headers)).text))
    for path in ("ledger_audit/ledger/entry/list", "config_manage/keys/api_key/list",
                 "config_manage/governance/webhook/list"):
        run.answers.append((path, (await call(http, ws, path, {})).text))


def dump_database(url: str) -> list[tuple[str, str]]:
    """Every row of every table, as text: (table, row)."""

    async def dump() -> list[tuple[str, str]]:
        engine = one_shot_engine(url)
        rows: list[tuple[str, str]] = []
        try:
            async with engine.connect() as conn:
                tables = await conn.run_sync(lambda c: schema_of(c).get_table_names())
                for table in tables:
                    result = await conn.execute(select(literal_column("*")).select_from(table_named(table)))
                    rows += [(table, repr(tuple(row))) for row in result]
        finally:
            await engine.dispose()
        return rows

    return _in_thread(dump)


def test_no_secret_is_stored_in_plaintext(trail: Trail, database_url: str) -> None:
    leaks = {(table, name) for table, row in dump_database(database_url) for name in trail.found_in(row)}
    assert not leaks, "\n".join(map(str, sorted(leaks)))


def test_no_secret_is_logged(trail: Trail, server: Server) -> None:
    lines = (server.stdout + server.stderr).splitlines()
    leaks = {(name, line[:300]) for line in lines for name in trail.found_in(line)}
    assert not leaks, "\n".join(map(str, sorted(leaks)))
    assert TRACEBACK not in server.stderr


def test_no_answer_shows_a_secret_it_was_not_created_for(trail: Trail) -> None:
    leaks = {(where, name) for where, text in trail.answers for name in trail.found_in(text)}
    assert not leaks, "\n".join(map(str, sorted(leaks)))


def test_what_webhook_receivers_get_carries_no_secret(trail: Trail, receiver: Receiver) -> None:
    leaks = {(r.path, name) for r in receiver.received for name in trail.found_in(r.body.decode())}
    assert not leaks, "\n".join(map(str, sorted(leaks)))


# Where a secret is shown on purpose, and which: each exactly where it is created (or rotated), plus the two
# documented repeats (a keyed creation replayed, a refresh token presented again within its grace window).
SHOWN = {
    "key registration": {"registered key"},
    "client registration": {"client secret"},
    "token": {"access token", "refresh token"},
    "refresh": {"refreshed access token", "rotated refresh token"},
    "refresh reused within the grace window": {"refreshed access token", "rotated refresh token"},
    "webhook created": {"webhook secret"},
    "webhook creation replayed": {"webhook secret"},
    "webhook rotated": {"rotated webhook secret"},
    "prism key create": {"cli key"},
}


def test_a_secret_is_shown_where_it_is_created_and_no_other_is(trail: Trail) -> None:
    assert {where: set(trail.found_in(text)) for where, text in trail.shown} == SHOWN
