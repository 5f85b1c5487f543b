"""Client ID metadata documents: the official `mcp` SDK names itself by an https URL served from a real HTTPS
server on loopback, and Prism fetches it through the SSRF-guarded client, with a cache and size limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from prism.app import create_app
from prism.config import Settings
from prism.oauth import client_documents
from tests.factories import Factory
from tests.oauth_support import OAUTH, authorize_params, consent, field, pkce, query_of, sign_in
from tests.processes import Server, ServerPool, clean_env
from tests.test_mcp_clients import MemoryTokens, every_tool, text_of
from tests.test_mcp_protocol import PATH
from tests.webhooks_receiver import Answer, Receiver, TlsFiles

REDIRECT = "http://127.0.0.1:9/callback"


def document(url: str, **fields: Any) -> Answer:
    body = {"client_id": url, "client_name": "Metadata client", "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "token_endpoint_auth_method": "none", **fields}
    return Answer(body=orjson.dumps(body).decode(), headers={"Content-Type": "application/json",
                                                             "Cache-Control": "max-age=600"})


@pytest.fixture(scope="module")
def server(database_url: str, tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pool = ServerPool(tmp_path_factory.mktemp("cimd-server"))
    try:
        yield pool.start(env=clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false",
                                       PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
                                       PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca)))
    finally:
        pool.stop_all()


async def test_the_sdk_client_authorizes_with_a_url_client_id(server: Server, receiver: Receiver,
                                                              factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    url = receiver.url("/cimd/sdk-client.json")
    receiver.script("/cimd/sdk-client.json", [document(url, client_name="SDK by URL")] * 3)
    base = server.base_url
    async with httpx.AsyncClient() as plain:
        meta = (await plain.get(f"{base}/.well-known/oauth-authorization-server")).json()
    assert meta["client_id_metadata_document_supported"] is True
    asked: list[str] = []

    async def redirect(target: str) -> None:
        asked.append(target)

    async def consent_in_a_scripted_browser() -> AuthorizationCodeResult:
        params = {k: v[0] for k, v in parse_qs(urlsplit(asked[-1]).query).items()}
        assert params["client_id"] == url
        async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
            answer = await consent(browser, params, email=ws.emails["owner"])
        assert answer.status_code == 303, answer.text
        back = query_of(answer.headers["location"])
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss"))

    storage = MemoryTokens()
    provider = OAuthClientProvider(
        server_url=base + PATH, storage=storage, redirect_handler=redirect,
        callback_handler=consent_in_a_scripted_browser, client_metadata_url=url,
        client_metadata=OAuthClientMetadata(client_name="SDK by URL", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none",
                                            scope="mcp:read mcp:write mcp:execute"))
    async with asyncio.timeout(120), httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(base + PATH, http_client=http), mode="legacy") as client:
            assert asked, "the client never had to authorize"
            assert "prism_entity_crud" in {t.name for t in await every_tool(client)}
            me = text_of(await client.call_tool("prism_whoami", {}))
            assert me["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
    assert storage.client is not None and storage.client.client_id == url
    assert storage.tokens is not None and storage.tokens.refresh_token
    # Fetched once, at the authorization: the token exchange used the cached document.
    assert len(receiver.at("/cimd/sdk-client.json")) == 1


async def _authorize_page(c: httpx.AsyncClient, client_id: str) -> httpx.Response:
    _, challenge = pkce()
    params = authorize_params(client_id, challenge, redirect_uri=REDIRECT)
    return await c.get(f"{OAUTH}/authorize/", params=params)


async def test_a_document_on_a_private_address_is_never_fetched(client: httpx.AsyncClient,
                                                                receiver: Receiver) -> None:
    url = receiver.url("/cimd/private.json")
    receiver.script("/cimd/private.json", [document(url)])
    page = await _authorize_page(client, url)  # the shared app: private networks not allowed
    assert page.status_code == 400 and "invalid_client" in page.text and "loopback" in page.text
    assert receiver.at("/cimd/private.json") == []


@pytest.mark.parametrize(("case", "answer"), [
    ("too-large", lambda url: document(url, client_name="x" * 200, contacts=["a" * 100] * 60)),
    ("other-id", lambda url: document(url + "-other")),
    ("secret", lambda url: document(url, client_secret="s")),
    ("confidential", lambda url: document(url, token_endpoint_auth_method="client_secret_post")),
    ("javascript-logo", lambda url: document(url, logo_uri="javascript:alert(1)")),
    ("http-redirect", lambda url: document(url, redirect_uris=["http://app.example.com/cb"])),
    ("not-found", lambda url: Answer(status=404)),
    ("not-json", lambda url: Answer(body="<html>")),
])
async def test_an_unusable_document_is_refused_and_its_failure_cached(hook_client: httpx.AsyncClient,
                                                                      receiver: Receiver, case: str,
                                                                      answer: Any) -> None:
    path = f"/cimd/{case}.json"
    url = receiver.url(path)
    receiver.script(path, [answer(url)] * 2)
    first = await _authorize_page(hook_client, url)
    assert first.status_code == 400 and "invalid_client" in first.text, first.text
    token = await hook_client.post(f"{OAUTH}/token/", data={"grant_type": "authorization_code", "code": "pac_x",
                                                             "code_verifier": "v" * 43, "client_id": url})
    assert token.status_code == 401 and token.json()["error"] == "invalid_client"
    assert len(receiver.at(path)) == 1  # the refusal was remembered


@pytest.mark.parametrize("client_id", ["https://127.0.0.1/", "https://u:p@example.com/a.json",
                                       "https://example.com/a/../b.json", "https://example.com/" + "a" * 120,
                                       "https://[::1/a.json"])
async def test_a_malformed_url_client_id_is_refused_without_a_fetch(hook_client: httpx.AsyncClient,
                                                                    client_id: str) -> None:
    page = await _authorize_page(hook_client, client_id)
    assert page.status_code == 400 and "invalid_client" in page.text


async def test_a_url_client_id_that_cannot_be_parsed_is_invalid_client_at_token_and_revoke(
        hook_client: httpx.AsyncClient) -> None:
    client_id = "https://[::1/a.json"  # an unclosed IPv6 bracket: urlsplit raises
    token = await hook_client.post(f"{OAUTH}/token/", data={"grant_type": "authorization_code", "code": "pac_x",
                                                             "code_verifier": "v" * 43, "client_id": client_id})
    revoke = await hook_client.post(f"{OAUTH}/revoke/", data={"token": "x", "client_id": client_id})
    for answer in (token, revoke):
        assert answer.status_code == 401 and answer.json()["error"] == "invalid_client", answer.text


async def test_a_document_slower_than_the_time_limit_is_refused(hook_client: httpx.AsyncClient, receiver: Receiver,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_documents, "FETCH_SECONDS", 0.3)  # the limit is 5 s; the test need not wait that
    url = receiver.url("/cimd/slow.json")
    receiver.script("/cimd/slow.json", [Answer(body=document(url).body, delay=1.5)])
    page = await _authorize_page(hook_client, url)
    assert page.status_code == 400 and "timed out" in page.text


async def test_fetches_count_in_the_addresss_discovery_tier(app: Any, hook_settings: Settings,
                                                            receiver: Receiver) -> None:
    """Authorize is exempt from the rate tiers, but each document it must fetch counts: made-up URL client_ids
    cannot make Prism fetch without limit."""
    limited = create_app(hook_settings.model_copy(update={"rate_limit_anonymous_discovery": 2}),
                         registry=app.state.registry)
    async with limited.router.lifespan_context(limited):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://localhost") as c:
            pages = []
            for n in range(3):
                path = f"/cimd/counted-{n}.json"
                receiver.script(path, [document(receiver.url(path))])
                pages.append(await _authorize_page(c, receiver.url(path)))
            again = await _authorize_page(c, receiver.url("/cimd/counted-0.json"))  # cached: not counted
    assert [p.status_code for p in pages] == [303, 303, 400]  # the first two go on to the login page
    assert "temporarily_unavailable" in pages[2].text
    assert receiver.at("/cimd/counted-2.json") == [] and again.status_code == 303


async def test_a_document_that_cannot_be_fetched_again_at_consent_shows_its_own_error(
        hook_client: httpx.AsyncClient, receiver: Receiver, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consent POST reads the client's registration again: its document expired while the page was open, and
    the server now answers 500. Neither a code nor the user's answer goes to the client; the page says why."""
    monkeypatch.setattr(client_documents, "MIN_TTL", 0.0)  # max-age=0 is then kept for no time at all
    ws = await factory.workspace(roles=("owner",))
    path = "/cimd/expires-at-consent.json"
    url = receiver.url(path)
    expiring = Answer(body=document(url).body, headers={"Content-Type": "application/json",
                                                        "Cache-Control": "max-age=0"})
    receiver.script(path, [expiring, expiring, Answer(status=500)])
    _, challenge = pkce()
    page = await hook_client.get(f"{OAUTH}/authorize/", params=authorize_params(client_id=url, challenge=challenge,
                                                                                 redirect_uri=REDIRECT))
    assert page.status_code == 303 and page.headers["location"].startswith("/login/"), page.text
    signed = await sign_in(hook_client, ws.emails["owner"], next_path=query_of(page.headers["location"])["next"])
    page = await hook_client.get(signed.headers["location"])
    assert page.status_code == 200 and "Metadata client" in page.text, page.text
    answer = await hook_client.post(f"{OAUTH}/authorize/", data={
        "csrf_token": field(page.text, "csrf_token"), "request": field(page.text, "request"), "decision": "allow"})
    assert answer.status_code == 400 and "location" not in answer.headers, answer.text
    assert "invalid_client" in answer.text and "client metadata document answered HTTP 500" in answer.text
    assert len(receiver.at(path)) == 3
