"""Authorize, token and revoke: the authorization-code flow with PKCE and its security cases."""

from __future__ import annotations

import httpx
import pytest

from prism.kit.ids import public_organization_id
from tests.factories import Factory, Workspace
from tests.oauth_support import (
    CLAUDE_REDIRECT,
    CLIENT_BODIES,
    OAUTH,
    authorize_params,
    bearer,
    browser,
    consent,
    error_code,
    field,
    get_code,
    offered_organizations,
    pkce,
    query_of,
    register,
    sign_in,
    tokens_for,
)

TOKEN = f"{OAUTH}/token/"
ME = "/api/v1/dev/me/"


async def test_full_flow_gives_a_token_that_calls_tools_as_the_chosen_organization(app: object,
                                                                                   factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600 and tokens["refresh_token"]
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert me.status_code == 200, me.text
    assert me.json()["organization"]["id"] == public_organization_id(ws.org.id)
    assert me.json()["user"]["email"] == ws.emails["owner"]
    assert me.json()["key"]["prefix"] == tokens["client"]["client_id"]


async def test_the_redirect_carries_code_state_and_the_issuer(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        _, challenge = pkce()
        answer = await consent(c, authorize_params(client["client_id"], challenge), email=ws.emails["owner"])
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith(CLAUDE_REDIRECT + "?")
    values = query_of(location)
    assert values["state"] == "state-123" and values["iss"] == f"http://{ws.host}" and values["code"]


@pytest.mark.parametrize(("registered", "prefix"), [
    ("https://app.example.com/cb?", "https://app.example.com/cb?code="),
    ("https://app.example.com/cb?tenant=7", "https://app.example.com/cb?tenant=7&code="),
    ("https://app.example.com/cb?tenant=7&", "https://app.example.com/cb?tenant=7&code="),
    ("com.example.app:/cb?", "com.example.app:/cb?code="),
])
async def test_the_code_is_added_to_the_registered_query(app: object, factory: Factory, registered: str,
                                                         prefix: str) -> None:
    """A registered URI's query is kept as registered, and the code joins it: a bare trailing `?` gets no second
    `?`, an existing query an `&` (none after a trailing one)."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "query", "redirect_uris": [registered],
                                    "token_endpoint_auth_method": "none"})
        answer = await consent(c, authorize_params(client["client_id"], pkce()[1], redirect_uri=registered),
                               email=ws.emails["owner"])
        assert answer.status_code == 303, answer.text
        location = answer.headers["location"]
        assert location.startswith(prefix), location
        assert query_of(location)["state"] == "state-123"
        denied = await consent(c, authorize_params(client["client_id"], pkce()[1], redirect_uri=registered),
                               email=ws.emails["owner"], decision="deny")
    error_prefix = prefix.removesuffix("code=") + "error="
    assert denied.headers["location"].startswith(error_prefix), denied.headers["location"]


@pytest.mark.parametrize(("changes", "error"), [
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge_method": None}, "invalid_request"),
    ({"code_challenge": None}, "invalid_request"),
    ({"code_challenge": "too-short"}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"response_type": None}, "invalid_request"),  # missing: RFC 6749 4.1.2.1
    ({"scope": "root:all"}, "invalid_scope"),
    ({"resource": "https://evil.example/"}, "invalid_target"),
])
@pytest.mark.parametrize("signed_in", [False, True])
async def test_bad_authorize_requests_are_shown_on_a_page_never_redirected(app: object, factory: Factory,
                                                                          changes: dict[str, str | None],
                                                                          error: str, signed_in: bool) -> None:
    """RFC 9700 4.11.2: anyone can register a client with any https redirect URI, so a known client and redirect
    URI do not make its errors safe to redirect: Prism would send whoever follows the link to that URI. Signed in
    or not, the error is Prism's page (the client and its redirect host named as text), no Location."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        if signed_in:
            await sign_in(c, ws.emails["owner"])
        params = authorize_params(client["client_id"], pkce()[1])
        for key, value in changes.items():
            if value is None:
                params.pop(key)
            else:
                params[key] = value
        answer = await c.get(f"{OAUTH}/authorize/", params=params)
    assert answer.status_code == 400, answer.text
    assert "location" not in answer.headers and "refresh" not in answer.headers
    assert error_code(answer.text) == error
    assert 'id="client-name">Claude<' in answer.text and 'id="redirect-host">claude.ai<' in answer.text
    assert "href=" not in answer.text and "state-123" not in answer.text


@pytest.mark.parametrize("resource", ["{origin}", "{origin}/", "{origin}/api/mcp/sse", "{origin}/api/mcp/sse/"])
async def test_the_resource_may_be_the_origin_or_the_mcp_endpoint(app: object, factory: Factory,
                                                                  resource: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws, resource=resource.format(origin=f"http://{ws.host}"))
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert me.status_code == 200, me.text


@pytest.mark.parametrize(("bound", "named", "error"), [
    ("{origin}/api/mcp/sse", None, None),
    ("{origin}/api/mcp/sse", "{origin}/api/mcp/sse/", None),
    ("{origin}/api/mcp/sse", "{origin}", "invalid_target"),
    (None, "{origin}", None),
    (None, "{origin}/api/mcp/sse", "invalid_target"),  # none bound is the origin bound
    ("{origin}", "https://evil.example/", "invalid_target"),
])
async def test_the_token_request_may_name_only_the_resource_the_authorization_bound(
        app: object, factory: Factory, bound: str | None, named: str | None, error: str | None) -> None:
    """RFC 8707: the code exchange and every refresh name the resource of the authorization request, or none."""
    ws = await factory.workspace(roles=("owner",))
    origin = f"http://{ws.host}"
    async with browser(app, ws.host) as c:
        client = await register(c)
        verifier, challenge = pkce()
        extra = {"resource": bound.format(origin=origin)} if bound else {}
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"], **extra)
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "client_id": client["client_id"], "redirect_uri": CLAUDE_REDIRECT}
        resource = {"resource": named.format(origin=origin)} if named else {}
        exchanged = await c.post(TOKEN, data={**form, **resource})
        if error is not None:
            assert exchanged.status_code == 400 and exchanged.json()["error"] == error, exchanged.text
            return
        assert exchanged.status_code == 200, exchanged.text
        refresh = {"grant_type": "refresh_token", "client_id": client["client_id"],
                   "refresh_token": exchanged.json()["refresh_token"]}
        elsewhere = origin if bound else origin + "/api/mcp/sse"
        refused = await c.post(TOKEN, data={**refresh, "resource": elsewhere})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_target", refused.text
        refreshed = await c.post(TOKEN, data={**refresh, **resource})  # the refused one spent nothing
        assert refreshed.status_code == 200, refreshed.text
        me = await c.get(ME, headers=bearer(refreshed.json()["access_token"]))
    assert me.status_code == 200, me.text


@pytest.mark.parametrize("redirect_uri", ["https://claude.ai/api/mcp/auth_callback/evil", "https://attacker.example/",
                                          "https://claude.ai/api/mcp/auth_callback?x=1", "https://[::1/cb",
                                          "http://[::1/cb"])
async def test_a_redirect_uri_that_does_not_match_is_shown_on_a_page_never_redirected(
        app: object, factory: Factory, redirect_uri: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        answer = await c.get(f"{OAUTH}/authorize/",
                             params=authorize_params(client["client_id"], pkce()[1], redirect_uri=redirect_uri))
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert "redirect_uri does not match" in answer.text
    assert answer.headers["x-frame-options"] == "DENY"


async def test_an_unknown_client_is_shown_on_a_page(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.get(f"{OAUTH}/authorize/", params=authorize_params("no-such-client", pkce()[1]))
    assert answer.status_code == 400 and "location" not in answer.headers
    assert "invalid_client" in answer.text


async def test_a_loopback_redirect_may_use_any_port_but_not_another_path(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "cli", "redirect_uris": ["http://127.0.0.1/callback"]})
        verifier, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"],
                              redirect_uri="http://127.0.0.1:49152/callback")
        token = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                                          "client_id": client["client_id"],
                                          "redirect_uri": "http://127.0.0.1:49152/callback"})
        other_path = await c.get(f"{OAUTH}/authorize/", params=authorize_params(
            client["client_id"], challenge, redirect_uri="http://127.0.0.1:49152/other"))
    assert token.status_code == 200, token.text
    assert other_path.status_code == 400 and "location" not in other_path.headers


@pytest.mark.parametrize("sent", [
    "http://127.0.0.1:49152/call\nback", "http://127.0.0.1:49152/call\tback", "http://127.0.0.1:49152/callback\r\n",
    "http://127.0.0.1:49\t152/callback", "\x01http://127.0.0.1:49152/callback", " http://127.0.0.1:49152/callback",
    "http://127.0.0.1:49152/callback?",
])
async def test_a_loopback_redirect_that_differs_in_more_than_its_authority_is_refused(
        app: object, factory: Factory, sent: str) -> None:
    """Only the authority of a loopback redirect may differ (RFC 8252 7.3): a URI that reads as the registered
    one once tabs, line breaks or leading control characters are dropped, or that adds an empty query, is
    another URI, and the code would go to it (another path of the port, a path of Prism's own host)."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "cli", "redirect_uris": ["http://127.0.0.1/callback"]})
        await sign_in(c, ws.emails["owner"])
        answer = await c.get(f"{OAUTH}/authorize/",
                             params=authorize_params(client["client_id"], pkce()[1], redirect_uri=sent))
    assert answer.status_code == 400 and "location" not in answer.headers, answer.headers.get("location")
    assert "redirect_uri does not match" in answer.text


@pytest.mark.parametrize(("registered", "sent"), [
    ("http://[::1]/cb", "http://[::1]:50123/cb"), ("http://localhost:3000/cb", "http://127.0.0.1:50123/cb"),
    ("http://127.0.0.1:8000/cb", "http://[::1]:50123/cb"), ("http://[::1]:9/cb", "http://localhost/cb"),
])
async def test_a_loopback_redirect_may_use_another_loopback_form(app: object, factory: Factory, registered: str,
                                                                 sent: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "native", "redirect_uris": [registered]})
        code = await get_code(c, client["client_id"], pkce()[1], email=ws.emails["owner"], redirect_uri=sent)
        assert code
        elsewhere = await c.get(f"{OAUTH}/authorize/", params=authorize_params(
            client["client_id"], pkce()[1], redirect_uri=sent.replace("/cb", "/other")))
        not_loopback = await c.get(f"{OAUTH}/authorize/", params=authorize_params(
            client["client_id"], pkce()[1], redirect_uri="http://10.0.0.1:50123/cb"))
    assert elsewhere.status_code == 400 and not_loopback.status_code == 400


async def test_oob_redirect_shows_the_code_on_a_page(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "manual", "redirect_uris": ["urn:ietf:wg:oauth:2.0:oob"]})
        verifier, challenge = pkce()
        page = await consent(c, authorize_params(client["client_id"], challenge,
                                                 redirect_uri="urn:ietf:wg:oauth:2.0:oob"), email=ws.emails["owner"])
        assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
        code = page.text.split('id="authorization-code">')[1].split("<")[0]
        token = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": code,
                                          "code_verifier": verifier, "client_id": client["client_id"],
                                          "redirect_uri": "urn:ietf:wg:oauth:2.0:oob"})
    assert token.status_code == 200, token.text


async def test_denying_consent_redirects_access_denied(app: object, factory: Factory) -> None:
    """The person answered Prism's consent page: their refusal goes back to the client, with state and iss."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        answer = await consent(c, authorize_params(client["client_id"], pkce()[1]), email=ws.emails["owner"],
                               decision="deny")
    assert answer.status_code == 303 and answer.headers["location"].startswith(CLAUDE_REDIRECT + "?")
    values = query_of(answer.headers["location"])
    assert values["error"] == "access_denied" and values["state"] == "state-123"
    assert values["iss"] == f"http://{ws.host}" and "code" not in values


async def _signed_in_consent_page(c: httpx.AsyncClient, ws: Workspace) -> httpx.Response:
    """The consent page of a newly registered client, for the workspace's owner, signed in."""
    client = await register(c)
    await sign_in(c, ws.emails["owner"])
    return await c.get(f"{OAUTH}/authorize/", params=authorize_params(client["client_id"], pkce()[1]))


async def test_consent_without_the_csrf_token_is_refused(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        page = await _signed_in_consent_page(c, ws)
        forged = await c.post(f"{OAUTH}/authorize/", data={"request": field(page.text, "request"),
                                                           "decision": "allow", "organization": ws.org.id})
    assert forged.status_code == 403 and "location" not in forged.headers


async def test_a_consent_form_with_a_forged_request_is_400(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        page = await _signed_in_consent_page(c, ws)
        sealed = field(page.text, "request")
        # A changed payload, and a signature with a character beyond ASCII (a form is whatever a client sends).
        for forged in (sealed.replace(".", "x.", 1), sealed[:-1] + "\u00e9"):
            answer = await c.post(f"{OAUTH}/authorize/", data={
                "request": forged, "csrf_token": field(page.text, "csrf_token"), "decision": "allow",
                "organization": ws.org.id})
            assert answer.status_code == 400 and "location" not in answer.headers, forged


async def test_an_organization_of_another_tenant_cannot_be_chosen(app: object, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        answer = await consent(c, authorize_params(client["client_id"], pkce()[1]), email=ws.emails["owner"],
                               organizations=[other.org.id])
    assert answer.status_code == 400 and "location" not in answer.headers


async def test_a_parameter_sent_without_a_value_counts_as_omitted(app: object, factory: Factory) -> None:
    """RFC 6749 3.1 and 3.2: "Parameters sent without a value MUST be treated as if they were omitted from the
    request." An empty redirect_uri is the client's only registered one, an empty resource the default audience,
    an empty state no state; at the token endpoint an empty redirect_uri is one the authorization did not send."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        verifier, challenge = pkce()
        params = {**authorize_params(client["client_id"], challenge), "redirect_uri": "", "resource": "",
                  "state": "", "scope": ""}
        answer = await consent(c, params, email=ws.emails["owner"])
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"].startswith(CLAUDE_REDIRECT + "?")
        values = query_of(answer.headers["location"])
        assert "state" not in values and values["code"]
        token = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": values["code"],
                                          "code_verifier": verifier, "client_id": client["client_id"],
                                          "redirect_uri": "", "client_secret": "", "scope": ""})
        assert token.status_code == 200, token.text
        revoked = await c.post(f"{OAUTH}/revoke/", data={"token": token.json()["refresh_token"], "client_id": "",
                                                         "token_type_hint": ""})
        assert revoked.status_code == 200, revoked.text
        assert (await c.get(ME, headers=bearer(token.json()["access_token"]))).status_code == 401
        missing = await c.post(TOKEN, data={"grant_type": "", "code": values["code"]})
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request", missing.text


async def test_a_wrong_code_verifier_is_invalid_grant(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        _, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"])
        answer = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": code,
                                           "code_verifier": pkce()[0], "client_id": client["client_id"],
                                           "redirect_uri": CLAUDE_REDIRECT})
        missing = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": code,
                                            "client_id": client["client_id"], "redirect_uri": CLAUDE_REDIRECT})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_grant"
    assert answer.headers["cache-control"] == "no-store"


async def test_replaying_a_code_is_refused_and_revokes_the_tokens_it_issued(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        verifier, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"])
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "client_id": client["client_id"], "redirect_uri": CLAUDE_REDIRECT}
        first = await c.post(TOKEN, data=form)
        assert (await c.get(ME, headers=bearer(first.json()["access_token"]))).status_code == 200
        replay = await c.post(TOKEN, data=form)
        after = await c.get(ME, headers=bearer(first.json()["access_token"]))
        refresh = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                            "refresh_token": first.json()["refresh_token"]})
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert after.status_code == 401 and after.json()["error"] == "invalid_token"
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"


async def test_another_clients_refresh_token_is_invalid_grant_and_revokes_nothing(app: object,
                                                                                  factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        other = await register(c, {"client_name": "other", "redirect_uris": ["https://other.example/cb"],
                                   "grant_types": ["authorization_code", "refresh_token"]})
        stolen = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": other["client_id"],
                                           "refresh_token": tokens["refresh_token"]})
        still = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    assert still.status_code == 200


@pytest.mark.parametrize("grant_type", ["password", "client_credentials", "implicit"])
async def test_unsupported_grant_types_are_refused(client: httpx.AsyncClient, grant_type: str) -> None:
    answer = await client.post(TOKEN, data={"grant_type": grant_type, "username": "a", "password": "b"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "unsupported_grant_type"
    assert answer.headers["cache-control"] == "no-store"


async def test_a_confidential_client_must_send_its_secret(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "web", "redirect_uris": ["https://web.example/cb"],
                                    "token_endpoint_auth_method": "client_secret_post"})
        verifier, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"],
                              redirect_uri="https://web.example/cb")
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "client_id": client["client_id"], "redirect_uri": "https://web.example/cb"}
        wrong = await c.post(TOKEN, data={**form, "client_secret": "pcs_wrong"})
        right = await c.post(TOKEN, data={**form, "client_secret": client["client_secret"]})
    # Authenticated in the form, not the Authorization header: 400 (SPEC; RFC 6749 5.2 asks 401 for the header)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_client"
    assert right.status_code == 200, right.text


async def test_revoking_a_refresh_token_revokes_its_access_tokens(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        revoked = await c.post(f"{OAUTH}/revoke/", data={"token": tokens["refresh_token"],
                                                         "client_id": tokens["client"]["client_id"]})
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert revoked.status_code == 200
    assert me.status_code == 401 and me.json()["error"] == "invalid_token"


async def test_revoking_an_access_token_revokes_it(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        revoked = await c.post(f"{OAUTH}/revoke/", data={"token": tokens["access_token"]})
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert revoked.status_code == 200 and me.status_code == 401


async def test_a_token_of_one_tenant_revoked_on_another_tenants_host_is_answered_200_and_revokes_nothing(
        app: object, factory: Factory) -> None:
    """A token works only on the host it was issued on, and so does its revocation: tenant B's authorization
    server answers 200 to tenant A's token (RFC 7009: nothing leaks) and leaves it alone, the refresh token as
    the access token (which was already so)."""
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with browser(app, a.host) as c:
        tokens = await tokens_for(c, a)
    client_id = tokens["client"]["client_id"]
    async with browser(app, b.host) as other:
        for token in (tokens["refresh_token"], tokens["access_token"]):
            for form in ({"token": token}, {"token": token, "client_id": client_id}):
                answer = await other.post(f"{OAUTH}/revoke/", data=form)
                assert answer.status_code == 200, answer.text
    async with browser(app, a.host) as c:
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
        refreshed = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": client_id,
                                              "refresh_token": tokens["refresh_token"]})
        assert me.status_code == 200, me.text
        assert refreshed.status_code == 200, refreshed.text
        # On its own host the revocation works.
        revoked = await c.post(f"{OAUTH}/revoke/", data={"token": refreshed.json()["refresh_token"]})
        assert revoked.status_code == 200
        assert (await c.get(ME, headers=bearer(refreshed.json()["access_token"]))).status_code == 401


@pytest.mark.parametrize("token", ["prt_unknown", "not-a-token", "a.b.c"])
async def test_revoking_an_unknown_token_still_answers_200(client: httpx.AsyncClient, token: str) -> None:
    answer = await client.post(f"{OAUTH}/revoke/", data={"token": token})
    assert answer.status_code == 200


async def test_userinfo_describes_the_token_owner(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        info = await c.get(f"{OAUTH}/userinfo/", headers=bearer(tokens["access_token"]))
        anonymous = await c.get(f"{OAUTH}/userinfo/")
    assert info.status_code == 200
    assert info.json()["email"] == ws.emails["owner"] and info.json()["org"] == ws.org.id
    assert anonymous.status_code == 401


@pytest.mark.parametrize("name", sorted(CLIENT_BODIES))
async def test_each_real_client_registration_completes_a_flow_and_refreshes(app: object, factory: Factory,
                                                                           name: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {**CLIENT_BODIES[name], "client_name": f"{name} {ws.tenant.subdomain}"})
        tokens = await tokens_for(c, ws, client=client)
        refresh = {"grant_type": "refresh_token", "client_id": client["client_id"],
                   "refresh_token": tokens["refresh_token"]}
        if "client_secret" in client:
            refresh["client_secret"] = client["client_secret"]
        refreshed = await c.post(TOKEN, data=refresh)
        me = await c.get(ME, headers=bearer(refreshed.json()["access_token"]))
    assert refreshed.status_code == 200, refreshed.text
    assert me.status_code == 200 and me.json()["organization"]["id"] == public_organization_id(ws.org.id)


@pytest.mark.parametrize(("scope", "refreshable"), [("mcp:read", False), ("mcp:read offline_access", True)])
async def test_a_client_not_registered_for_the_refresh_token_grant_gets_a_refresh_token_only_with_offline_access(
        app: object, factory: Factory, scope: str, refreshable: bool) -> None:
    """RFC 6749 6 / OAuth 2.1: no refresh token for a client that may not use one. Asking for offline_access lets
    a client registered for authorization_code only refresh, so it gets one then, and so does every refresh."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "No refresh", "redirect_uris": ["https://norefresh.example/cb"],
                                    "grant_types": ["authorization_code"]})
        issued = await tokens_for(c, ws, client=client, scope=scope)
        assert ("refresh_token" in issued) is refreshable, issued
        assert (await c.get(ME, headers=bearer(issued["access_token"]))).status_code == 200
        if refreshable:
            refreshed = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                                  "refresh_token": issued["refresh_token"]})
            assert refreshed.status_code == 200 and refreshed.json()["refresh_token"], refreshed.text


@pytest.mark.parametrize("change", ["redirect_uri_replaced", "registration_deleted"])
async def test_a_consent_answered_after_the_registration_changed_sends_nothing_to_the_old_redirect(
        app: object, factory: Factory, change: str) -> None:
    """The consent page's request is sealed when the page is shown; the client may change its registration
    (RFC 7592) before the user answers. Neither a code nor a denial goes to a redirect URI the client no longer
    registers, or for a client that is gone."""
    ws = await factory.workspace(roles=("owner",))
    # A registration of its own: identical public registrations share one client, whose token its first holds.
    own = {**CLIENT_BODIES["claude"], "client_name": f"Changing {change}",
           "redirect_uris": [f"https://app.example.com/{change}/callback"]}
    async with browser(app, ws.host) as c:
        client = await register(c, own)
        _, challenge = pkce()
        page = await c.get(f"{OAUTH}/authorize/", params=authorize_params(
            client["client_id"], challenge, redirect_uri=own["redirect_uris"][0]))
        signed = await sign_in(c, ws.emails["owner"], next_path=query_of(page.headers["location"])["next"])
        page = await c.get(signed.headers["location"])
        assert page.status_code == 200, page.text
        manage = bearer(client["registration_access_token"])
        if change == "registration_deleted":
            assert (await c.delete(client["registration_client_uri"], headers=manage)).status_code == 204
        else:
            body = {**own, "client_id": client["client_id"],
                    "redirect_uris": [f"https://app.example.com/{change}/other_callback"]}
            changed = await c.put(client["registration_client_uri"], headers=manage, json=body)
            assert changed.status_code == 200, changed.text
        answers = []
        for decision in ("allow", "deny"):
            form = {"csrf_token": field(page.text, "csrf_token"), "request": field(page.text, "request"),
                    "decision": decision, **{f"organization:{o}": "yes" for o in offered_organizations(page.text)}}
            answers.append(await c.post(f"{OAUTH}/authorize/", data=form))
    for answer in answers:
        assert answer.status_code == 400 and "location" not in answer.headers, answer.text
        assert error_code(answer.text) == "invalid_request"
