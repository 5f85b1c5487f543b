"""Per-caller caches are keyed by what a caller sees and bounded, whatever credentials callers bring.

An OAuth client may be granted any set of well-formed `<app>.<verb>` scopes, including scopes naming apps that
do not exist, and a refresh may ask for any subset: every distinct set was a grant with a cache entry of its own
(a whole tenant descriptor, ~13 MB at 8,900 handlers) that was never evicted.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import BUILTIN_ROLES, PermissionSet
from prism.mcp_server.tools import LISTS_KEPT, TOOL_LISTS, list_tools
from prism.openapi.tenant import DESCRIPTORS_KEPT, counts, kept_descriptors, tenant_descriptor
from prism.registry.catalog import CATALOGS, CATALOGS_KEPT, all_tools
from prism.registry.registry import Registry, build_registry
from prism.registry.visibility import GRANTS_KEPT, VIEWS_KEPT, view_of
from tests import oauth_support as oauth
from tests.factories import Factory

PATH = "/.well-known/openapi.json"


def _auth(scopes: frozenset[str], organization_id: str = "o") -> AuthContext:
    return AuthContext(tenant_id="t", tenant_subdomain="t", tenant_name=None, organization_id=organization_id,
                       organization_name="Org", user_id="u", user_email="u@example.com", role="owner",
                       permissions=PermissionSet(BUILTIN_ROLES["owner"]), scopes=scopes, credential_kind="oauth",
                       credential_id="c", key_prefix="", key_name="k", key_created_at=datetime.now(UTC),
                       usage=KeyUsage(None))


def _fresh_registry() -> Registry:
    return build_registry().freeze()


async def test_grants_that_see_the_same_handlers_share_one_entry_in_every_cache() -> None:
    registry = _fresh_registry()
    base = frozenset({"mcp:read"})
    auths = [_auth(base | {f"nosuchapp{i}.view"}) for i in range(50)]  # 50 grants, one view
    views = {id(view_of(registry, auth)) for auth in auths}
    catalogs = {id(all_tools(registry, auth)) for auth in auths}
    lists = {id(list_tools(registry, auth, "2025-06-18")) for auth in auths}
    descriptors = {id(await tenant_descriptor(registry, auth)) for auth in auths}
    assert len(views) == len(catalogs) == len(lists) == len(descriptors) == 1
    assert len(CATALOGS[registry]) == len(TOOL_LISTS[registry]) == len(kept_descriptors(registry)) == 1


async def test_every_per_caller_cache_stays_bounded_however_many_views_callers_bring() -> None:
    registry = _fresh_registry()
    permissions = sorted({h.permission for h in registry if h.permission})
    # Singles, pairs and triples of real per-handler scopes: more distinct views than any cache keeps.
    scope_sets = [frozenset(permissions[i:i + width]) for width in (1, 2, 3) for i in range(len(permissions))]
    auths = [_auth(scopes) for scopes in scope_sets]
    distinct = {view_of(registry, auth).key for auth in auths}
    assert len(distinct) > VIEWS_KEPT and len(auths) > GRANTS_KEPT
    for auth in auths:
        all_tools(registry, auth)
        list_tools(registry, auth, "2025-06-18")
    for auth in auths[:DESCRIPTORS_KEPT + 8]:
        await tenant_descriptor(registry, auth)
    memo = registry.visibility_memo
    assert memo is not None
    assert len(memo.by_grant) <= GRANTS_KEPT and len(memo.by_key) <= VIEWS_KEPT
    assert len(CATALOGS[registry]) <= CATALOGS_KEPT and len(TOOL_LISTS[registry]) <= LISTS_KEPT
    assert len(kept_descriptors(registry)) <= DESCRIPTORS_KEPT
    # The most recent view is still served from its cache.
    assert all_tools(registry, auths[-1]) is all_tools(registry, auths[-1])


async def test_refreshed_tokens_with_ever_new_scope_sets_share_one_descriptor(app: Any, factory: Factory) -> None:
    """Over the wire: one authorization asks for scopes of apps that do not exist, and each refresh narrows to a
    different subset. Every token sees the same handlers, so every answer is one document with one ETag."""
    ws = await factory.workspace()
    kept = kept_descriptors(app.state.registry)
    async with oauth.browser(app, ws.host) as c:
        wanted = "mcp:read offline_access " + " ".join(f"ghost{i}.view" for i in range(12))
        tokens = await oauth.tokens_for(c, ws, scope=wanted)
        refresh, client_id = tokens["refresh_token"], tokens["client"]["client_id"]
        etags = set()
        before = len(kept)
        for i in range(12):
            answer = await c.post(f"{oauth.OAUTH}/token/", data={
                "grant_type": "refresh_token", "refresh_token": refresh, "client_id": client_id,
                "scope": f"mcp:read offline_access ghost{i}.view"})
            assert answer.status_code == 200, answer.text
            refresh = answer.json()["refresh_token"]
            document = await c.get(PATH, headers=oauth.bearer(answer.json()["access_token"]))
            assert document.status_code == 200
            etags.add(document.headers["etag"])
    assert len(etags) == 1
    assert len(kept) <= before + 1


async def test_hosts_in_rotation_are_served_without_compressing_or_building_again(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """One document serves every tenant host and port: each request names its own `servers`, and neither a new
    build nor a new compression of the whole document follows, however many hosts take turns."""
    tenants = [await factory.workspace(roles=("owner",)) for _ in range(3)]
    await client.get(PATH, headers=tenants[0].headers())  # the build (and its one compression)
    builds, compressions = counts.builds, counts.compressions
    etags = set()
    for _ in range(2):
        for ws in tenants:
            for port in range(9000, 9012):
                host = f"{ws.host}:{port}"
                for encoding in ("gzip", "identity"):
                    answer = await client.get(PATH, headers={**ws.headers(host=host), "Accept-Encoding": encoding})
                    assert answer.status_code == 200
                    assert answer.json()["servers"] == [{"url": f"http://{host}"}]  # httpx decodes gzip
                    etags.add(answer.headers["etag"])
    assert (counts.builds, counts.compressions) == (builds, compressions)
    assert len(etags) == 3 * 12 * 2  # each host and representation its own strong tag


async def test_the_gzip_body_is_one_valid_stream_with_the_hosts_servers_last(client: httpx.AsyncClient,
                                                                            factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = {**ws.headers(host=f"{ws.host}:7001"), "Accept-Encoding": "gzip"}
    raw = await client.send(client.build_request("GET", PATH, headers=headers), stream=True)
    body = b"".join([chunk async for chunk in raw.aiter_raw()])
    await raw.aclose()
    assert raw.headers["content-encoding"] == "gzip"
    document = orjson.loads(gzip.decompress(body))
    assert document["servers"] == [{"url": f"http://{ws.host}:7001"}]
    assert list(document)[-1] == "servers" and document["openapi"] == "3.0.3"
    plain = await client.get(PATH, headers={**headers, "Accept-Encoding": "identity"})
    assert orjson.loads(plain.content) == document


async def test_a_cached_document_is_sent_as_the_bytes_it_is_kept_as_never_copied(app: Any, factory: Factory) -> None:
    """A request for a kept descriptor sends the kept body itself, then its host's `servers`: at 10,000 handlers
    the identity body is ~14 MB, which a join with the host's few bytes copied on every request."""
    ws = await factory.workspace(roles=("owner",))
    kept = kept_descriptors(app.state.registry)
    for encoding in ("identity", "gzip"):
        headers = [(b"host", ws.host.encode()), (b"authorization", f"Bearer {ws.keys['owner']}".encode()),
                   (b"accept-encoding", encoding.encode())]
        for _ in range(2):  # the first request may build the document; the second is served from what is kept
            sent = await _asgi_get(app, PATH, headers)
        start, *bodies = sent
        length = int(dict(start["headers"])[b"content-length"])
        assert start["status"] == 200 and sum(len(m["body"]) for m in bodies) == length
        assert [m.get("more_body", False) for m in bodies] == [True] * (len(bodies) - 1) + [False]
        kept_bodies = [built.gzip_body if encoding == "gzip" else built.body for built in kept.values()]
        assert any(bodies[0]["body"] is body for body in kept_bodies), encoding
        whole = b"".join(m["body"] for m in bodies)
        document = orjson.loads(gzip.decompress(whole) if encoding == "gzip" else whole)
        assert document["servers"] == [{"url": f"http://{ws.host}"}] and list(document)[-1] == "servers"


async def _asgi_get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """The ASGI messages the app sends for a GET, as sent (an HTTP client would join the body's pieces)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80), "state": {}}
    await app(scope, receive, send)
    return sent
