"""The console in a real headless Chromium against a real server, one test per role: the oversight inbox (a new
request appears without reloading; approve with a note; four eyes), the ledger (filters, an entry's hash links,
verification, export) — and what each role is not shown. Each page passes axe-core with no serious or critical
violation, on a desktop and at 390 px."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from prism.config import Settings
from tests.console_support import CHROMIUM, CHROMIUM_ARGS, check_page, no_horizontal_scroll, require_tools, serve
from tests.console_support import sign_in as console_sign_in
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key

GATED = {"name": "gated-vendors", "default": "allow",
         "oversight": ["entity_crud/finance/vendor/create", "entity_crud/finance/vendor/update"],
         "oversight_priority": "high", "oversight_sla_seconds": 900}
PHONE = {"width": 390, "height": 844}
RECEIVER = "https://93.184.215.14/hook"  # a public address: the served app refuses private ones; nothing is sent
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"


@pytest.fixture(scope="module")
def port(settings: Settings) -> Iterator[int]:
    yield from serve(settings)


async def _escalate(http: httpx.AsyncClient, ws: Workspace, name: str) -> str:
    response = await http.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("agent"), json={
        "app": "finance", "entity": "vendor", "operation": "create", "arguments": {"name": name}})
    assert response.status_code == 202, response.text
    request_id: str = response.json()["details"]["oversight_request_id"]
    return request_id


async def _setup(factory: Factory, port: int) -> tuple[Workspace, str, httpx.AsyncClient]:
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Host": f"{ws.host}:{port}"})
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as setup:
        await governed_key(factory, _HostClient(setup, f"{ws.host}:{port}"), ws, "agent", persona=GATED,
                           risk_level="limited")  # its calls record governance decisions too
    return ws, f"http://{ws.host}:{port}", http


class _HostClient:
    """governed_key's client, sending the tenant host (with the live server's port) on every request."""

    def __init__(self, client: httpx.AsyncClient, host: str) -> None:
        self.client, self.host = client, host

    async def post(self, url: str, *, json: Any, headers: dict[str, str]) -> httpx.Response:
        return await self.client.post(url, json=json, headers={**headers, "Host": self.host})


async def _fetch(page: Any, url: str, form: dict[str, str] | None = None) -> tuple[int, str]:
    """A request made by the page itself (its cookie, its origin), as a hand-made form or link would be."""
    status, text = await page.evaluate("""async ([url, form]) => {
        const init = form ? {method: "POST", body: new URLSearchParams(form)} : {};
        const response = await fetch(url, {credentials: "same-origin", ...init});
        return [response.status, await response.text()];
    }""", [url, form])
    return int(status), str(text)


async def _browser(playwright: Any, **context: Any) -> tuple[Any, Any]:
    browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    page = await (await browser.new_context(bypass_csp=True, accept_downloads=True, **context)).new_page()
    return browser, page


async def test_an_owner_decides_oversight_and_reads_verifies_and_exports_the_ledger(
        port: int, factory: Factory) -> None:
    require_tools()
    from playwright.async_api import async_playwright

    ws, base, http = await _setup(factory, port)
    async with http, async_playwright() as playwright:
        browser, page = await _browser(playwright)
        try:
            await console_sign_in(page, base, ws.emails["owner"])
            assert await page.text_content("#user-role") == "owner"
            assert await page.locator("#nothing-pending").count() == 1
            await check_page(page, "owner-inbox-empty")

            # A call escalated while the inbox is open shows up without a reload.
            request_id = await _escalate(http, ws, "Acme")
            card = page.locator(f"#request-{request_id}")
            await card.wait_for(timeout=25_000)  # the inbox polls every 10 s
            assert await card.locator(".asked-by").text_content() == ws.emails["agent"]
            assert '"name": "Acme"' in (await card.locator("pre.arguments").text_content() or "")
            assert "due in" in (await card.locator("time").text_content() or "")
            await check_page(page, "owner-inbox-pending")

            await card.locator("textarea").fill("known supplier")
            await card.locator("button.approve").click()
            await page.wait_for_selector("#console-notice")
            assert "approved" in (await page.text_content("#console-notice") or "")
            decided = page.locator(f"#decided tr[data-request='{request_id}']")
            assert await decided.locator(".status").text_content() == "approved"
            assert "known supplier" in (await decided.text_content() or "")
            ran = await http.post("/api/mcp/tools/prism_entity_crud/",
                                  headers={**ws.headers("agent"), "X-Prism-Oversight-Request": request_id},
                                  json={"app": "finance", "entity": "vendor", "operation": "create",
                                        "arguments": {"name": "Acme"}})
            assert ran.status_code == 200, ran.text

            # The ledger: the approval itself is an entry of the console door, by this owner.
            await page.click("text=Ledger")
            await page.wait_for_selector("#entries")
            await page.select_option("#f-outcome", "allowed")
            await page.fill("#f-coordinate", "governance_review/*")
            await page.click("#apply-filters")
            await page.wait_for_selector("#entries tr[data-entry]")
            rows = page.locator("#entries tbody tr[data-entry]")
            assert "console" in (await rows.first.text_content() or "")
            assert ws.emails["owner"] in (await page.text_content("#entries") or "")
            await check_page(page, "owner-ledger-filtered")
            await rows.first.locator("a").click()
            await page.wait_for_selector("#hash-links")
            assert await page.text_content("#check-content") == "yes"
            assert "yes" in (await page.text_content("#check-mac") or "")
            await check_page(page, "owner-ledger-entry")
            await page.click("#previous-entry")
            await page.wait_for_selector("#next-entry")

            await page.click("text=Back to the ledger")
            await page.click("#verify-full")
            await page.wait_for_selector("#verification")
            assert "Verified" in (await page.text_content("#verification") or "")
            await check_page(page, "owner-ledger-verified")
            async with page.expect_download() as waiting:
                await page.click("#export-csv")
            download = await waiting.value
            rows_csv = list(csv.DictReader(io.StringIO((await download.path()).read_text())))
            assert rows_csv and {"seq", "coordinate", "entry_hash"} <= set(rows_csv[0])
            assert any(r["coordinate"] == "entity_crud/finance/vendor/create" and r["outcome"] == "allowed"
                       for r in rows_csv)

            # Personas, AI systems, missions: made here, a mission's budget bar moves with the calls under it.
            await page.click("text=Personas, AI systems, missions")
            await page.click("text=New persona")
            await page.fill("#p-name", "console-made")
            await page.fill("#p-allow", "entity_crud/finance/*/*\nreport_query/*/*/*")
            await page.fill("#p-oversight", "not a pattern")
            await page.click("#create-persona")
            assert "'not a pattern'" in (await page.text_content("#console-error") or "")  # the handler's check
            assert await page.input_value("#p-name") == "console-made"  # what was typed stays
            await page.fill("#p-oversight", "entity_crud/finance/invoice/update")
            await page.click("#create-persona")
            await page.wait_for_selector("#console-notice")
            persona = page.locator("#personas li", has_text="console-made")
            assert "entity_crud/finance/*/*, report_query/*/*/*" in (await persona.text_content() or "")
            await page.click("text=Register an AI system")
            await page.fill("#s-name", "invoice bot")
            await page.select_option("#s-risk", "high")
            await page.click("#create-ai-system")
            await page.wait_for_selector("#ai-systems tr:has-text('invoice bot')")
            await page.click("text=Plan a mission")
            await page.fill("#m-name", "Quarter close")
            await page.fill("#m-budget", "10")
            await page.click("#create-mission")
            mission_card = page.locator("#missions li", has_text="Quarter close")
            mission_id = await mission_card.get_attribute("data-mission")
            assert mission_id and await mission_card.locator("meter").get_attribute("value") == "0"
            started = await http.post("/api/mcp/tools/prism_mission_control/", headers=ws.headers("owner"), json={
                "app": "missions", "entity": "mission", "operation": "start", "arguments": {"id": mission_id}})
            assert started.status_code == 200, started.text
            for _ in range(3):
                spent = await http.post("/api/mcp/tools/prism_entity_crud/",
                                        headers={**ws.headers("owner"), "X-Prism-Mission": mission_id},
                                        json={"app": "finance", "entity": "vendor", "operation": "list",
                                              "arguments": {}})
                assert spent.status_code == 200, spent.text
            await page.reload()
            assert await mission_card.locator("meter").get_attribute("value") == "3"
            assert "3 of 10" in (await mission_card.locator("label").text_content() or "")
            await check_page(page, "owner-governance")

            # Webhooks: made, tested, resent, rotated and edited here; each secret is shown once.
            await page.click("nav >> text=Webhooks")
            await page.fill("#w-name", "SIEM")
            await page.fill("#w-url", "http://93.184.215.14/hook")
            await page.check("input[name='event:governance.decision.block']")
            await page.click("#create-webhook")
            assert "url" in (await page.text_content("#console-error") or "")  # the handler's rule: https only
            assert await page.is_checked("input[name='event:governance.decision.block']")  # what was chosen stays
            await page.fill("#w-url", RECEIVER)
            await page.click("#create-webhook")
            first_secret = (await page.text_content("#new-secret-value") or "").strip()
            assert first_secret.startswith("whk_secret_")
            await check_page(page, "owner-webhooks-created")
            await page.click("#webhooks >> text=SIEM")
            await page.click("#send-test")
            await page.wait_for_selector("#deliveries tr[data-id]")
            await page.click("#deliveries button.resend")
            await page.wait_for_selector("#console-notice")
            assert await page.locator("#deliveries tr[data-id]").count() == 2
            await page.click("#rotate-secret")
            second_secret = (await page.text_content("#new-secret-value") or "").strip()
            assert second_secret.startswith("whk_secret_") and second_secret != first_secret
            await page.fill("#w-name", "SIEM renamed")
            await page.click("#save-webhook")
            await page.wait_for_selector("#console-notice")
            assert await page.locator("#new-secret").count() == 0  # not shown again
            assert "SIEM renamed" in (await page.text_content("h1") or "")
            assert first_secret not in await page.content() and second_secret not in await page.content()
            await check_page(page, "owner-webhook-detail")
        finally:
            await browser.close()


async def test_the_person_whose_call_was_escalated_cannot_decide_it(port: int, factory: Factory) -> None:
    require_tools()
    from playwright.async_api import async_playwright

    ws, base, http = await _setup(factory, port)
    async with http, async_playwright() as playwright:
        browser, page = await _browser(playwright)
        try:
            request_id = await _escalate(http, ws, "Self Approval Ltd")
            # An escalated update shows the record as it is now beside what the call asks for.
            vendor = await http.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("owner"), json={
                "app": "finance", "entity": "vendor", "operation": "create",
                "arguments": {"name": "Old Name", "payment_terms_days": 30}})
            assert vendor.status_code == 200, vendor.text
            update = await http.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("agent"), json={
                "app": "finance", "entity": "vendor", "operation": "update", "arguments": {
                    "id": vendor.json()["data"]["id"], "name": "New Name", "payment_terms_days": 30}})
            assert update.status_code == 202, update.text
            update_id = update.json()["details"]["oversight_request_id"]
            await console_sign_in(page, base, ws.emails["agent"])  # an owner too, but the one who asked
            changes = page.locator(f"#request-{update_id} .changes-table")
            name_row = changes.locator("tr[data-field='name']")
            assert await name_row.get_attribute("class") == "changed"
            assert await name_row.locator(".current").text_content() == '"Old Name"'
            assert '"New Name"' in (await name_row.locator(".requested").text_content() or "")
            assert await changes.locator("tr[data-field='payment_terms_days']").get_attribute("class") == "same"
            assert await page.locator(f"#request-{request_id} .changes-table").count() == 0  # a create: no record
            card = page.locator(f"#request-{request_id}")
            assert await card.locator(".own-request").count() == 1
            assert await card.locator("button.approve").count() == 0
            # The rule is the handler's, not the page's: a hand-made form post is refused the same way.
            token = await page.evaluate("document.querySelector('input[name=csrf_token]').value")
            status, text = await _fetch(page, f"/console/oversight/{request_id}/decide/?org={ws.org.id}",
                                        {"csrf_token": token, "decision": "approve", "note": ""})
            assert status == 403 and "self_approval_forbidden" in text
            await check_page(page, "requester-inbox")
        finally:
            await browser.close()


@pytest.mark.parametrize("role", ["member", "viewer"])
async def test_members_and_viewers_see_the_inbox_and_ledger_without_the_levers_on_a_phone(
        port: int, factory: Factory, role: str) -> None:
    require_tools()
    from playwright.async_api import async_playwright

    ws, base, http = await _setup(factory, port)
    async with http, async_playwright() as playwright:
        browser, page = await _browser(playwright, viewport=PHONE, is_mobile=True, has_touch=True)
        try:
            request_id = await _escalate(http, ws, f"{role} view")
            await console_sign_in(page, base, ws.emails[role])
            card = page.locator(f"#request-{request_id}")
            assert await card.count() == 1 and await card.locator("button.approve").count() == 0
            assert "cannot decide" in (await card.text_content() or "")
            await no_horizontal_scroll(page)
            await check_page(page, f"{role}-inbox-phone")
            token = await page.evaluate("document.querySelector('input[name=csrf_token]').value")
            status, text = await _fetch(page, f"/console/oversight/{request_id}/decide/?org={ws.org.id}",
                                        {"csrf_token": token, "decision": "approve", "note": ""})
            assert status == 403 and "permission_denied" in text

            # The form's datetime-local fields send times without a zone: the page reads them as UTC.
            await page.goto(f"{base}/console/ledger/?org={ws.org.id}&since=2999-01-01T00:00")
            assert await page.text_content("#entry-total") == "0"
            await page.goto(f"{base}/console/ledger/?org={ws.org.id}&until=2999-01-01T00:00&seq_from=x")
            assert "seq_from" in (await page.text_content("#console-error") or "")
            await page.goto(f"{base}/console/ledger/?org={ws.org.id}&outcome=refused")
            await page.wait_for_selector("#entries")
            assert await page.locator("#export-csv").count() == 0  # ledger.export_entry: owners and admins
            assert "oversight_required" in (await page.text_content("#entries") or "")
            blocked = page.locator("#decisions tr[data-decision]")  # the escalation, as a BLOCK decision
            assert await blocked.count() == 1 and "BLOCK" in (await blocked.text_content() or "")
            await no_horizontal_scroll(page)
            await check_page(page, f"{role}-ledger-phone")
            status, text = await _fetch(page, f"/console/ledger/export/?org={ws.org.id}&format=csv")
            assert status == 403 and "ledger.export_entry" in text

            await page.goto(f"{base}/console/governance/?org={ws.org.id}")
            await page.wait_for_selector("#missions")
            assert await page.locator("#persona-form, #ai-system-form").count() == 0  # governance.manage_*
            # Members plan missions (`*.add_*`); viewers only look.
            assert await page.locator("#mission-form").count() == (1 if role == "member" else 0)
            await no_horizontal_scroll(page)
            await check_page(page, f"{role}-governance-phone")

            # The person's own keys, minted and revoked here by members and viewers alike (keys.add_key,
            # keys.change_key: a viewer's key can do no more than the viewer).
            await page.click("text=API keys")
            assert await page.locator(f"#keys tr[data-prefix='{ws.keys[role][:15]}']").count() == 1
            await page.fill("#k-name", f"{role} console key")
            await page.uncheck("input[name='mcp:execute']")
            await page.select_option("#k-surface", "split")
            await no_horizontal_scroll(page)
            await page.click("#create-key")
            plaintext = (await page.text_content("#new-key-value") or "").strip()
            assert plaintext.startswith("ck_")
            await check_page(page, f"{role}-keys-phone")
            headers = {"Authorization": f"Bearer {plaintext}", "Host": f"{ws.host}:{port}"}
            me = await http.get("/api/v1/dev/me/", headers=headers)
            assert me.status_code == 200 and me.json()["key"]["scopes"] == ["mcp:read", "mcp:write"]
            await page.click(f"#keys tr[data-prefix='{plaintext[:15]}'] button.revoke")
            await page.wait_for_selector("#console-notice")
            minted_row = page.locator(f"#keys tr[data-prefix='{plaintext[:15]}']")
            assert await minted_row.locator(".tool-surface").text_content() == "split"
            assert await minted_row.locator(".status").text_content() == "revoked"
            assert (await http.get("/api/v1/dev/me/", headers=headers)).status_code == 401

            # Webhooks: a member tests and edits (not deletes); a viewer sees them without any lever.
            hook = (await http.post(WEBHOOKS, headers=ws.headers("owner"), json={"name": "SIEM", "url": RECEIVER}))
            assert hook.status_code == 201, hook.text
            hook_id = hook.json()["id"]
            assert (await http.post(f"{WEBHOOKS}{hook_id}/test/", headers=ws.headers("owner"))).status_code == 202
            await page.click("nav >> text=Webhooks")
            await page.click("#webhooks >> text=SIEM")
            await page.wait_for_selector("#deliveries tr[data-id]")
            levers = "#send-test, #rotate-secret, #edit-webhook-form, #deliveries button.resend"
            assert await page.locator(levers).count() == (4 if role == "member" else 0)
            assert await page.locator("#delete-webhook").count() == 0  # governance.delete_webhook: owners, admins
            assert hook.json()["secret"] not in await page.content()
            await no_horizontal_scroll(page)
            await check_page(page, f"{role}-webhook-phone")
            if role == "viewer":
                status, text = await _fetch(page, f"/console/webhooks/{hook_id}/rotate/?org={ws.org.id}",
                                            {"csrf_token": token})
                assert status == 403 and "governance.change_webhook" in text
                await page.click("text=All webhooks")
                assert await page.locator("#no-webhook-levers").count() == 1
                assert await page.locator("#create-webhook-form").count() == 0

            await page.click("text=Members")
            owner_row = page.locator(f"#members tr[data-member='{ws.emails['owner']}']")
            assert await owner_row.locator(".role").text_content() == "owner"
            await no_horizontal_scroll(page)
            await check_page(page, f"{role}-members-phone")

            # Keyboard only: the skip link leads to the content.
            await page.goto(f"{base}/console/oversight/?org={ws.org.id}")
            await page.keyboard.press("Tab")
            assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
            await page.keyboard.press("Enter")
            assert await page.evaluate("document.activeElement.id") == "content"
        finally:
            await browser.close()


async def test_the_front_pages_lead_to_the_console_and_describe_the_api(port: int, factory: Factory) -> None:
    require_tools()
    from playwright.async_api import async_playwright

    ws = await factory.workspace(roles=("viewer",))
    base = f"http://{ws.host}:{port}"
    async with async_playwright() as playwright:
        browser, page = await _browser(playwright, viewport=PHONE, is_mobile=True, has_touch=True)
        try:
            await page.goto(f"{base}/")
            await check_page(page, "front-tenant-phone")
            await no_horizontal_scroll(page)
            assert await page.get_attribute("#to-portal", "href") == f"http://portal.localhost:{port}/"
            await page.click("#to-console")
            await page.wait_for_url(f"{base}/login/**")

            await page.goto(f"http://portal.localhost:{port}/")
            operations = page.locator("li.operation")
            assert await operations.count() >= 10
            assert await page.locator("li.operation:has-text('/api/v1/dev/call/')").count() == 1
            assert await page.get_attribute("#portal-descriptor", "href") == "/.well-known/openapi.json"
            await no_horizontal_scroll(page)
            await check_page(page, "front-portal-phone")

            # The interactive reference: the vendored Swagger UI, served by Prism, renders the descriptor.
            await page.click("#portal-reference")
            operation = page.locator(".opblock", has_text="/api/v1/dev/call/")
            await operation.first.wait_for(timeout=15_000)
            assert await page.get_attribute("#reference-guide", "href") == "/api/v1/dev/introspect/?dimension=guide"
            # Checked with one operation opened (its parameters and answers): all the collapsed page holds, and more.
            await operation.first.locator(".opblock-summary-control").click()
            await operation.first.locator(".opblock-body .responses-wrapper").wait_for()
            await check_page(page, "portal-api-reference-operation-phone")
        finally:
            await browser.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        platform = await http.get("/")  # the platform host has no front page: JSON 404 as before
        assert platform.status_code == 404 and platform.json()["error"] == "not_found"
        reference = await http.get("/api-reference/", headers={"Host": f"{ws.host}:{port}"})
        assert reference.status_code == 404  # the reference is the portal host's
