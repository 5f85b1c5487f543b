"""A real `prism serve`: one JSON access line per request on stdout, a WARNING security line for every refused
credential, lockout, 429 and refused outbound target, and no secret anywhere in what the process printed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from tests.processes import ServerPool, clean_env

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
HOOKS = "/api/v1/risk-assessment/governance/webhooks/"
CHATGPT = {"client_name": "ChatGPT", "redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect"],
           "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
           "token_endpoint_auth_method": "client_secret_post", "application_type": "web"}


def log_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"ts"')]


def test_access_and_security_lines_and_no_secret_in_any_output(tmp_path: Path) -> None:
    pool = ServerPool(tmp_path)
    try:
        server = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=f"sqlite:///{tmp_path / 'logs.db'}",
                                                    PRISM_SEED_DEMO="true", PRISM_LOCKOUT_FAILURES="6"),
                            ready=False)
        banner = server.banner_json(timeout=60)
        server.wait_ready()
        key, password = banner["api_key"], banner["admin_password"]
        tenant = {"Host": "demo.localhost"}
        wrong_key = key[:-6] + "zzzzzz"
        wrong_password = "not-" + password
        code = "code-Zq8" + "x" * 30
        secrets = [key, wrong_key, key[len(key) // 2:], password, wrong_password, code]
        with httpx.Client(base_url=server.base_url) as client:
            called = client.post(TOOL, json=LIST_PARTS, headers={**tenant, "Authorization": f"Bearer {key}",
                                                                  "X-Request-ID": "call-1"})
            assert called.status_code == 200 and called.headers["x-request-id"] == "call-1"
            assert client.post(TOOL, json=LIST_PARTS, headers={**tenant, "Authorization": f"Bearer {wrong_key}"}
                               ).status_code == 401
            page = client.get("/login/", headers=tenant).text
            [csrf] = re.findall(r'name="csrf_token" value="([^"]+)"', page)
            login = {"email": banner["admin_email"], "password": wrong_password, "next": "/", "csrf_token": csrf}
            assert client.post("/login/", data=login, headers=tenant).status_code == 401
            assert client.post("/login/", data={**login, "password": password}, headers=tenant).status_code == 303
            registered = client.post("/api/mcp/oauth/register", json=CHATGPT, headers=tenant).json()
            secrets.append(registered["client_secret"])
            token = client.post("/api/mcp/oauth/token", headers=tenant, data={
                "grant_type": "authorization_code", "code": code, "client_id": registered["client_id"],
                "client_secret": registered["client_secret"], "redirect_uri": CHATGPT["redirect_uris"][0]})
            assert token.status_code == 400, token.text
            refused_client = client.post("/api/mcp/oauth/token", headers=tenant, data={
                "grant_type": "authorization_code", "code": code, "client_id": registered["client_id"],
                "client_secret": registered["client_secret"] + "x"})
            assert refused_client.status_code == 400, refused_client.text  # secret in the form: 400, not 401
            bearer = {**tenant, "Authorization": f"Bearer {key}"}
            private = client.post(HOOKS, headers=bearer, json={
                "name": "n", "url": "https://127.0.0.1:9/hook", "events": ["governance.decision.block"]})
            assert private.status_code == 400, private.text
            hook = client.post(HOOKS, headers=bearer, json={
                "name": "n", "url": "https://8.8.8.8/hook", "events": ["governance.decision.block"]})
            assert hook.status_code in (200, 201), hook.text
            secrets.append(hook.json()["secret"])
            statuses = [client.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {wrong_key}"}).status_code
                        for _ in range(6)]
            assert statuses[-1] == 429  # the lockout, after six failures (the ones above count too)
        server.stop()  # everything it printed is in its files now
        # Everything printed but the banner, which shows the demo key and password once, by design.
        printed = [line for line in server.stdout.splitlines() if not line.startswith('{"url"')]
        output = "\n".join(printed) + server.stderr
        for secret in secrets:
            assert secret not in output, f"a secret ({secret[:4]}...) was printed:\n{output}"
        lines = log_lines(server.stdout)
        [access] = [line for line in lines if line["logger"] == "prism.access" and line["request_id"] == "call-1"]
        assert access["method"] == "POST" and access["path"] == TOOL and access["status"] == 200
        assert access["tool"] == "entity_crud/spare_parts/spare_part/list" and access["door"] == "rest"
        assert access["tenant"] == "demo" and access["org"] and key.startswith(access["credential"])
        assert isinstance(access["duration_ms"], float) and access["level"] == "info"
        security = [(line["event"], line.get("path")) for line in lines if line["logger"] == "prism.security"]
        assert all(line["level"] == "warning" for line in lines if line["logger"] == "prism.security")
        assert ("authentication_failed", TOOL) in security
        assert ("authentication_failed", "/login/") in security
        assert ("authentication_failed", "/api/mcp/oauth/token") in security
        assert ("locked_out", "/api/v1/dev/me/") in security
        refused_targets = [line for line in lines if line.get("event") == "outbound_target_refused"]
        assert refused_targets and refused_targets[0]["host"] == "127.0.0.1"
        assert "uvicorn.access" not in output and '"GET /api/v1/dev/ping/ HTTP/1.1"' not in output
    finally:
        pool.stop_all()
