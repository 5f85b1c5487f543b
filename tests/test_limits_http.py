"""The limits on the REST doors: tiers per address and per user, 429 shapes with Retry-After, exemptions,
the lockout on every door, and client addresses behind trusted proxies."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable

import httpx
import pytest

from prism.config import Settings
from prism.identity.service import add_to_organization, require_user
from prism.keys.service import create_key
from prism.models import Tenant
from prism.ratelimit.memory import MemoryBackend
from tests.factories import PASSWORD, Factory
from tests.limits_support import FakeClock, client_for, limited_app
from tests.test_limits_dashboard import sign_in

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


async def test_anonymous_requests_get_30_per_minute_per_address_then_429_with_retry_after(
        settings: Settings, app: object) -> None:
    async with limited_app(settings, app) as limited, client_for(limited) as client, \
            client_for(limited, "203.0.113.11") as neighbour:
        statuses = [(await client.get("/api/v1/dev/ping/")).status_code for _ in range(30)]
        assert statuses == [200] * 30
        refused = await client.get("/api/v1/dev/ping/")
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limited" and "30 requests per minute" in refused.json()["message"]
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.headers["RateLimit-Limit"] == "30" and refused.headers["RateLimit-Remaining"] == "0"
        # A request without a credential to an authenticated endpoint is anonymous too.
        assert (await client.get("/api/v1/dev/me/")).status_code == 429
        assert (await neighbour.get("/api/v1/dev/ping/")).status_code == 200


async def test_the_consoles_static_files_do_not_spend_the_anonymous_ceiling(settings: Settings, app: object) -> None:
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        for name in ["console.css", "console.js", "swagger-ui-bundle.js", "swagger-ui.css"] * 10:
            assert (await client.get(f"/console/static/{name}")).status_code == 200
        statuses = [(await client.get("/api/v1/dev/ping/")).status_code for _ in range(31)]
        assert statuses == [200] * 30 + [429]  # the 40 files counted nowhere


async def test_a_signed_in_reader_counts_per_user_not_in_the_addresses_anonymous_ceiling(
        settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app, rate_limit_authenticated=45) as limited, client_for(limited) as reader, \
            client_for(limited) as neighbour, client_for(limited) as forger:
        await sign_in(reader, ws.emails["member"])
        assert [(await reader.get("/keys/")).status_code for _ in range(45)] == [200] * 44 + [429]  # per user
        # Others behind the same address still have the anonymous 30 (the reader's pages were not counted there).
        assert [(await neighbour.get("/api/v1/dev/ping/")).status_code for _ in range(30)] == [200] * 30
        # A cookie that does not verify is no session: anonymous, and that window is now spent.
        forged = reader.cookies["prism_session"][:-4] + "AAAA"
        forger.cookies.set("prism_session", forged)
        refused = await forger.get("/keys/")
        assert refused.status_code == 429 and refused.headers["RateLimit-Limit"] == "30"


async def test_a_session_cookie_of_any_bytes_is_no_session_and_no_error(settings: Settings, app: object) -> None:
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        for cookie in ["prism_session=a.\u00e9", "prism_session=\u00e9.\u00e9", "prism_session=....", "prism_session"]:
            headers = {"Cookie": cookie.encode("latin-1")}
            assert (await client.get("/api/v1/dev/ping/", headers=headers)).status_code == 200
            signed_out = await client.get("/keys/", headers=headers)
            assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login/")


async def test_authenticated_users_are_counted_per_user_with_the_canonical_envelope_on_429(
        settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member", "viewer"))
    async with limited_app(settings, app, rate_limit_authenticated=4) as limited, client_for(limited) as client:
        for _ in range(4):
            ok = await client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))
            assert ok.status_code == 200, ok.text
        refused = await client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))
        assert refused.status_code == 429
        body = refused.json()
        assert body["success"] is False and body["error"] == "rate_limited"
        assert body["tool_name"] == "prism_entity_crud"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60 and refused.headers["RateLimit-Limit"] == "4"
        # The sandbox doors share the user's counter; another user of the same address has their own.
        sandbox = await client.post("/api/v1/dev/call/", headers=ws.headers("member"),
                                    json={"name": "prism_entity_crud", "arguments": LIST_PARTS})
        assert sandbox.status_code == 429 and sandbox.json()["error"] == "rate_limited"
        assert "Retry-After" in sandbox.headers
        assert (await client.get("/api/v1/dev/me/", headers=ws.headers("viewer"))).status_code == 200


async def test_owners_and_admins_get_the_admin_ceiling(settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.add_key(ws, "admin", role="admin")
    async with limited_app(settings, app, rate_limit_authenticated=2, rate_limit_admin=5) as limited, \
            client_for(limited) as client:
        for label, allowed in (("owner", 5), ("admin", 5), ("member", 2)):
            statuses = [(await client.get("/api/v1/dev/me/", headers=ws.headers(label))).status_code
                        for _ in range(allowed + 1)]
            assert statuses == [200] * allowed + [429], label


async def test_well_known_and_authorize_are_exempt(settings: Settings, app: object) -> None:
    async with limited_app(settings, app, rate_limit_anonymous=2) as limited, client_for(limited) as client:
        for _ in range(5):
            assert (await client.get("/.well-known/oauth-authorization-server")).status_code != 429
            assert (await client.get("/api/mcp/oauth/authorize/?client_id=x")).status_code != 429
        assert [(await client.get("/api/v1/dev/ping/")).status_code for _ in range(3)] == [200, 200, 429]


async def test_login_and_key_registration_share_the_authentication_endpoints_ceiling(
        settings: Settings, app: object) -> None:
    async with limited_app(settings, app, rate_limit_auth_endpoints=3, rate_limit_anonymous=100) as limited, \
            client_for(limited) as client:
        assert (await client.get("/login/")).status_code == 200
        assert (await client.post("/api/mcp/api-keys/register/", json={})).status_code == 400
        assert (await client.get("/login/")).status_code == 200
        refused = await client.post("/api/mcp/api-keys/register/", json={})
        assert refused.status_code == 429 and "Retry-After" in refused.headers
        assert refused.json()["error"] == "rate_limited"
        assert (await client.get("/api/v1/dev/ping/")).status_code == 200


async def test_oauth_endpoints_count_in_their_own_discovery_window_not_the_authentication_one(
        settings: Settings, app: object) -> None:
    """A hosted connector's users share its egress address: the OAuth endpoints have a window of their own."""
    async with limited_app(settings, app, rate_limit_auth_endpoints=1, rate_limit_anonymous=1,
                           rate_limit_anonymous_discovery=4) as limited, client_for(limited) as client:
        statuses = [(await client.post("/api/mcp/oauth/token/", data={"grant_type": "nonsense"})).status_code,
                    (await client.post("/api/mcp/oauth/register/", json={})).status_code,
                    (await client.post("/api/mcp/oauth/revoke/", data={})).status_code,
                    (await client.get("/api/mcp/oauth/userinfo/")).status_code]
        assert 429 not in statuses, statuses
        refused = await client.post("/api/mcp/oauth/token/", data={"grant_type": "nonsense"})
        assert refused.status_code == 429 and "Retry-After" in refused.headers
        assert refused.json()["error"] == "rate_limited" and "error_description" in refused.json()
        assert refused.headers["RateLimit-Limit"] == "4"
        # The other windows were untouched.
        assert (await client.get("/login/")).status_code == 200
        assert (await client.get("/api/v1/dev/ping/")).status_code == 200


async def test_ten_failed_authentications_lock_the_address_for_300_seconds_on_every_door(
        settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    clock = FakeClock()
    async with limited_app(settings, app) as limited, client_for(limited) as client, \
            client_for(limited, "203.0.113.99") as other:
        limited.state.rate_limiter.backend.clock = clock
        bad = {"Authorization": "Bearer ck_" + "x" * 40, "Host": ws.host}
        doors: list[Callable[[], Awaitable[httpx.Response]]] = [
                 lambda: client.post(TOOL, json=LIST_PARTS, headers=bad),
                 lambda: client.get("/api/v1/dev/me/", headers=bad),
                 lambda: client.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers=bad),
                 lambda: client.post("/api/v1/dev/call/", json={"name": "prism_whoami"}, headers=bad),
                 lambda: client.post("/api/mcp/sse", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                     headers={**bad, "Accept": "application/json, text/event-stream"})]
        for i in range(10):
            assert (await doors[i % len(doors)]()).status_code == 401
        # The 11th request is refused whatever it carries, a valid key included, on every path but discovery.
        anything: list[Callable[[], Awaitable[httpx.Response]]] = [
            lambda: client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member")),
            lambda: client.get("/api/v1/dev/ping/"), lambda: client.get("/login/")]
        for request in anything:
            blocked = await request()
            assert blocked.status_code == 429, blocked.text
            assert "too_many_failed_attempts" in blocked.text and blocked.headers["Retry-After"] == "300"
        login = await client.get("/login/")  # a person reads this refusal: a page that cannot be framed
        assert login.headers["content-type"].startswith("text/html") and login.headers["X-Frame-Options"] == "DENY"
        assert (await client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))).json()["success"] is False
        assert (await client.get("/.well-known/oauth-authorization-server")).status_code != 429
        assert (await other.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 200
        clock.advance(120)
        assert (await client.get("/api/v1/dev/ping/")).headers["Retry-After"] == "180"
        clock.advance(180)
        assert (await client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))).status_code == 200


async def test_nine_failures_do_not_lock(settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        bad = {"Authorization": "Bearer mcp_" + "y" * 40, "Host": ws.host}
        for _ in range(9):
            assert (await client.get("/api/v1/dev/me/", headers=bad)).status_code == 401
        assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 200


async def test_failed_logins_and_key_registrations_count_towards_the_lockout(
        settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app, rate_limit_key_registration=100) as limited, \
            client_for(limited) as client:
        for _ in range(5):
            wrong = {"email": ws.emails["member"], "password": "wrong password"}
            assert (await client.post("/api/mcp/api-keys/register/", json=wrong)).status_code == 401
        page = await client.get("/login/")
        csrf = page.text.split('name="csrf_token" value="')[1].split('"')[0]
        for _ in range(5):
            form = {"csrf_token": csrf, "email": ws.emails["member"], "password": "nope", "next": "/"}
            assert (await client.post("/login/", data=form)).status_code == 401
        right = {"email": ws.emails["member"], "password": PASSWORD}
        blocked = await client.post("/api/mcp/api-keys/register/", json=right)
        assert blocked.status_code == 429 and blocked.headers["Retry-After"] == "300"


@pytest.mark.parametrize("trusted", [False, True])
async def test_forwarded_for_counts_only_behind_a_trusted_proxy(settings: Settings, app: object,
                                                                trusted: bool) -> None:
    proxy = "10.9.8.7"
    async with limited_app(settings, app, rate_limit_anonymous=2,
                           trusted_proxies=proxy if trusted else "") as limited, \
            client_for(limited, proxy) as client:
        alice = [(await client.get("/api/v1/dev/ping/", headers={"X-Forwarded-For": "198.51.100.1"})).status_code
                 for _ in range(2)]
        bob = (await client.get("/api/v1/dev/ping/", headers={"X-Forwarded-For": "198.51.100.2"})).status_code
        assert alice == [200, 200]
        # Behind a trusted proxy each client has its own counter; otherwise all share the proxy's.
        assert bob == (200 if trusted else 429)


async def test_a_second_forwarded_for_line_does_not_let_a_client_choose_its_address(
        settings: Settings, app: object) -> None:
    """The client's own line comes first and the trusted proxy's appended line second (as HAProxy's `option
    forwardfor` writes it): the lines are read as one list, so ten guesses lock out the address the proxy saw."""
    async with limited_app(settings, app, trusted_proxies="10.9.8.7") as limited, \
            client_for(limited, "10.9.8.7") as client:
        for i in range(10):
            lines = [("Authorization", f"Bearer ck_guess{i:040d}"), ("X-Forwarded-For", f"198.51.100.{i}"),
                     ("X-Forwarded-For", "203.0.113.50")]
            assert (await client.get("/api/v1/dev/me/", headers=lines)).status_code == 401
        blocked = await client.get("/api/v1/dev/ping/", headers=[("X-Forwarded-For", "203.0.113.50")])
        other = await client.get("/api/v1/dev/ping/", headers=[("X-Forwarded-For", "203.0.113.51")])
    assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_failed_attempts"
    assert other.status_code == 200


async def test_clients_behind_a_proxy_that_writes_ports_are_counted_apart(settings: Settings, app: object) -> None:
    async with limited_app(settings, app, rate_limit_anonymous=2, trusted_proxies="10.9.8.7") as limited, \
            client_for(limited, "10.9.8.7") as client:
        for hop in ("198.51.100.1:5000", "[2001:db8:1::1]:443", "[2001:db8:2::1]"):
            statuses = [(await client.get("/api/v1/dev/ping/", headers={"X-Forwarded-For": hop})).status_code
                        for _ in range(3)]
            assert statuses == [200, 200, 429], hop  # each client its own window, not the proxy's shared one


async def test_a_basic_credential_on_a_bearer_path_is_a_guess(settings: Settings, app: object) -> None:
    """No Bearer path accepts Basic: a request presenting one sent a credential that is not valid there, and counts
    toward the lockout like any other refused credential (docs/limits.md "Lockout")."""
    basic = {"Authorization": "Basic " + base64.b64encode(b"admin:hunter2").decode()}
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        for _ in range(10):
            refused = await client.get("/api/v1/dev/me/", headers=basic)
            assert refused.status_code == 401 and refused.json()["error"] == "authentication_required"
        blocked = await client.get("/api/v1/dev/ping/")
    assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_failed_attempts"


async def test_the_memory_backend_clock_is_injectable(settings: Settings, app: object) -> None:
    async with limited_app(settings, app) as limited:
        assert isinstance(limited.state.rate_limiter.backend, MemoryBackend)


async def test_concurrent_requests_never_pass_the_ceiling(settings: Settings, app: object,
                                                          factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app, rate_limit_authenticated=25) as limited, client_for(limited) as client:
        responses = await asyncio.gather(*(client.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))
                                           for _ in range(60)))
        anonymous = await asyncio.gather(*(client.get("/api/v1/dev/ping/") for _ in range(60)))
    assert [r.status_code for r in responses].count(200) == 25
    assert [r.status_code for r in anonymous].count(200) == 30


async def test_a_user_in_two_organizations_has_one_window_held_to_each_credentials_ceiling(
        settings: Settings, app: object, factory: Factory) -> None:
    """Admin in one organization, member in another: 5 requests a minute in all, at most 2 in the member one."""
    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws)
    async with factory.db.write() as s:
        user = await require_user(s, ws.emails["owner"])
        await add_to_organization(s, user, second, role="member")
        tenant = await s.get(Tenant, ws.tenant.id)
        assert tenant is not None
        ws.keys["as member"] = (await create_key(s, tenant=tenant, user=user, organization=second)).plaintext
    async with limited_app(settings, app, rate_limit_authenticated=2, rate_limit_admin=5) as limited, \
            client_for(limited) as client:
        async def status(label: str) -> int:
            return (await client.get("/api/v1/dev/me/", headers=ws.headers(label))).status_code

        assert [await status("as member") for _ in range(2)] == [200, 200]
        assert await status("as member") == 429  # the member organization's ceiling, counted per user
        # The refused request counts too, as in every window: three so far, two left under the admin ceiling.
        assert [await status("owner") for _ in range(2)] == [200, 200]
        refused = await client.get("/api/v1/dev/me/", headers=ws.headers("owner"))
        assert refused.status_code == 429 and refused.headers["RateLimit-Limit"] == "5"
