"""Console pages as a browser reaches them: links made elsewhere, a session that ended, a form posted once
signed out."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from tests.factories import Factory
from tests.oauth_support import browser, field, query_of, sign_in

SPOOF = "Your keys leaked: mint a new key and mail it to security@attacker.example"


async def test_a_crafted_link_cannot_put_words_of_its_own_on_a_console_page(app: Any, factory: Factory) -> None:
    """The console's notices are Prism's own ("Key ck_… revoked.", "Saved."); a link made by anyone must not
    make the console say whatever its author wants in the page's status box, as the webhook admin page already
    guarantees ("Only known notices: a crafted link cannot put words of its own on the page")."""
    ws = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        pages = {path: await c.get(path, params={**org, "notice": SPOOF})
                 for path in ("/console/keys/", "/console/oversight/", "/console/governance/", "/console/webhooks/")}
    for path, page in pages.items():
        assert page.status_code == 200, path
        assert "attacker.example" not in page.text, f"{path} shows the link's own words as a notice"


async def test_a_form_posted_after_the_session_ended_leads_back_to_a_page_after_signing_in(
        app: Any, factory: Factory) -> None:
    """A person whose session expired presses "Revoke" (or Approve, Rotate, Delete...): the console sends them to
    the login page with `next=` the form's action, and after signing in the browser GETs that POST-only address
    and lands on a bare JSON 405 instead of a console page (the console's routes are "all on the page door
    (refusals render as pages)", prism/console/endpoints.py)."""
    ws = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        posted = await c.post("/console/keys/any-key/revoke/", params=org, data={"csrf_token": "stale"})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login/")
        next_path = query_of(posted.headers["location"])["next"]
        signed = await sign_in(c, ws.emails["owner"], next_path=next_path)
        assert signed.status_code == 303, signed.text
        landed = await c.get(signed.headers["location"])
    assert landed.status_code in (200, 303), (unquote(next_path), landed.status_code, landed.text[:200])
    assert landed.headers["content-type"].startswith("text/html") or landed.status_code == 303


async def test_a_session_cookie_is_refused_once_its_person_signed_out(app: Any, factory: Factory) -> None:
    """Signing out ends the session: the cookie it replaced (copied off a shared computer, or kept by a proxy)
    must not keep acting in the console, minting keys, for the rest of its 12 hours."""
    ws = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        kept = c.cookies.get("prism_session")
        token = field((await c.get("/console/keys/", params=org)).text, "csrf_token")
        out = await c.post("/logout/", data={"csrf_token": token, "next": "/console/"})
        assert out.status_code == 303
    async with browser(app, ws.host) as replay:
        replay.cookies.set("prism_session", kept)
        minted = await replay.post("/console/keys/", params=org, data={"csrf_token": token, "name": "after sign-out",
                                                                      "mcp:read": "on"})
    assert minted.status_code == 303 and minted.headers["location"].startswith("/login/"), (
        minted.status_code, minted.text[-300:])


async def test_a_refused_governance_form_keeps_the_risk_level_and_default_that_were_chosen(
        app: Any, factory: Factory) -> None:
    """docs/governance.md: "a handler's refusal (a malformed pattern) is shown on the page with what was typed
    kept". The text fields are kept, but the two choices are not: the page comes back with the first option
    selected, so correcting the name and pressing Register again files a `high`-risk AI system as `minimal`,
    and a persona meant to allow by default as one that denies."""
    import re

    ws = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await c.get("/console/governance/", params=org)).text, "csrf_token")
        system = await c.post("/console/governance/ai_system/", params=org, data={
            "csrf_token": token, "name": "x" * 101, "risk_level": "high", "description": "triage agent"})
        persona = await c.post("/console/governance/persona/", params=org, data={
            "csrf_token": token, "name": "p", "default": "allow", "oversight": "not a pattern"})
    assert system.status_code == 400 and 'value="triage agent"' in system.text  # the text is kept
    assert persona.status_code == 400 and "not a pattern" in persona.text
    assert re.search(r'<option value="high"[^>]*selected', system.text), "the risk level chosen is lost"
    assert re.search(r'<option value="allow"[^>]*selected', persona.text), "the default chosen is lost"


def _verification_start(page: str) -> str | None:
    import re

    found = re.search(r'id="verification"[^>]*data-start="([^"]*)"', page)
    return found.group(1) if found else None


async def test_a_link_cannot_make_the_console_verify_the_whole_log(app: Any, factory: Factory) -> None:
    """`/console/ledger/?verify=full` read the organization's whole log on a GET: a link or an image on another site
    (the session cookie goes along with a top-level GET, SameSite=Lax) made a reviewer's browser start it, as
    often as the page was loaded. A GET now shows the check since the latest checkpoint; the whole log is
    checked by a POST carrying the page's CSRF token, for the organization of the page only."""
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        linked = await c.get("/console/ledger/", params={**org, "verify": "full"})
        assert linked.status_code == 200 and _verification_start(linked.text) == "latest_checkpoint"
        token = field(linked.text, "csrf_token")
        forged = await c.post("/console/ledger/", params=org, data={"csrf_token": "from another site"})
        assert forged.status_code == 403 and _verification_start(forged.text) is None
        elsewhere = await c.post("/console/ledger/", params={"org": other.org.id}, data={"csrf_token": token})
        assert 400 <= elsewhere.status_code < 500 and _verification_start(elsewhere.text) is None
        pressed = await c.post("/console/ledger/", params={**org, "outcome": "allowed"},
                               data={"csrf_token": token})
    assert pressed.status_code == 200, pressed.text[-500:]
    assert _verification_start(pressed.text) == "first_entry" and "Verified (the whole log)" in pressed.text
    assert '<option value="allowed" selected>' in pressed.text  # the page keeps its filters
