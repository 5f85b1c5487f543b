"""The authorize endpoint is no open redirector (RFC 9700 4.11.2): registration is anonymous and takes any https
redirect URI, so an attacker's client on a real tenant host must not turn a bad request into a redirect to the
attacker's site. Errors are Prism's page until the person answers the consent page."""

from __future__ import annotations

import pytest

from tests.factories import Factory
from tests.oauth_support import OAUTH, authorize_params, browser, consent, error_code, pkce, query_of, register, sign_in

EVIL = "https://evil.example/cb"
ATTACKER = {"client_name": "Totally Legit", "redirect_uris": [EVIL], "token_endpoint_auth_method": "none"}

BAD_REQUESTS = [
    pytest.param({"response_type": "token"}, "unsupported_response_type", id="response_type=token"),
    pytest.param({"scope": "root:all"}, "invalid_scope", id="unknown scope"),
    pytest.param({"code_challenge": None}, "invalid_request", id="no code_challenge"),
]


def _phishing_link(client_id: str, changes: dict[str, str | None]) -> dict[str, str]:
    params = authorize_params(client_id, pkce()[1], redirect_uri=EVIL)
    for key, value in changes.items():
        if value is None:
            params.pop(key)
        else:
            params[key] = value
    return params


@pytest.mark.parametrize("path", [f"{OAUTH}/authorize/", "/authorize/"])
@pytest.mark.parametrize("signed_in", [False, True])
@pytest.mark.parametrize(("changes", "error"), BAD_REQUESTS)
async def test_an_attackers_client_with_a_bad_request_gets_prisms_page_not_a_redirect(
        app: object, factory: Factory, changes: dict[str, str | None], error: str, signed_in: bool,
        path: str) -> None:
    """A phishing link on a tenant host, to a visitor signed in or not: a 400 page naming the client and its
    redirect host as text, with no Location, no link to it and nothing else that would take the browser there."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        attacker = await register(c, ATTACKER)
        if signed_in:
            await sign_in(c, ws.emails["owner"])
        answer = await c.get(path, params=_phishing_link(attacker["client_id"], changes))
    assert answer.status_code == 400, answer.text
    assert "location" not in answer.headers and "refresh" not in answer.headers
    assert error_code(answer.text) == error
    assert 'id="client-name">Totally Legit<' in answer.text and 'id="redirect-host">evil.example<' in answer.text
    assert "href=" not in answer.text and "http-equiv" not in answer.text and EVIL not in answer.text


@pytest.mark.parametrize(("changes", "error"), BAD_REQUESTS)
async def test_a_client_registered_on_another_tenants_host_still_fails_on_the_page(
        app: object, factory: Factory, changes: dict[str, str | None], error: str) -> None:
    """Clients are global: one registered on tenant B's host is known on tenant A's, and its bad requests there
    are A's error page too."""
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with browser(app, other.host) as elsewhere:
        attacker = await register(elsewhere, ATTACKER)
    async with browser(app, ws.host) as c:
        await sign_in(c, ws.emails["owner"])
        answer = await c.get(f"{OAUTH}/authorize/", params=_phishing_link(attacker["client_id"], changes))
    assert answer.status_code == 400 and "location" not in answer.headers, answer.headers.get("location")
    assert error_code(answer.text) == error


async def test_an_unknown_client_id_on_a_tenant_host_fails_on_the_page(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.get(f"{OAUTH}/authorize/", params=_phishing_link("prism-no-such-client",
                                                                           {"response_type": "token"}))
    assert answer.status_code == 400 and "location" not in answer.headers
    assert error_code(answer.text) == "invalid_client" and 'id="client-name"' not in answer.text


async def test_declining_on_the_consent_page_still_redirects_access_denied_with_state(
        app: object, factory: Factory) -> None:
    """Only a person's answer on the consent page goes back to the client, whoever registered it."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        attacker = await register(c, ATTACKER)
        answer = await consent(c, _phishing_link(attacker["client_id"], {}), email=ws.emails["owner"],
                               decision="deny")
    assert answer.status_code == 303 and answer.headers["location"].startswith(EVIL + "?")
    values = query_of(answer.headers["location"])
    assert values == {"error": "access_denied", "error_description": "the user denied the request",
                      "state": "state-123", "iss": f"http://{ws.host}"}
