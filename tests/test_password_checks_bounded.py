"""Password checks are bounded (prism.identity.passwords): sign-ins sent all at once beyond the checks running and
waiting are answered 503 `password_checks_busy` with Retry-After at once, in the endpoint's error shape, instead
of queueing until every client times out; API keys are served meanwhile. A real `prism serve`, its bound lowered
to one check at a time and two waiting."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from tests.oauth_support import field
from tests.processes import ServerPool, clean_env, scratch_database

REGISTRATIONS = 30
LOGINS = 10
KEY_REQUESTS = 10
ADMITTED = 3  # PRISM_PASSWORD_CHECK_THREADS + PRISM_PASSWORD_CHECK_QUEUE


async def _storm(base_url: str, email: str, api_key: str) -> tuple[list[httpx.Response], list[httpx.Response],
                                                                     list[httpx.Response]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=httpx.Limits(max_connections=64)) as client:
        page = await client.get("/login/")
        csrf = field(page.text, "csrf_token")

        def address(i: int) -> dict[str, str]:  # one address each: only the bound on password checks may refuse
            return {"X-Forwarded-For": f"198.51.100.{i + 1}"}

        registrations = [client.post("/api/mcp/api-keys/register/", headers=address(i),
                                     json={"email": email, "password": f"wrong {i}"}) for i in range(REGISTRATIONS)]
        logins = [client.post("/login/", headers=address(REGISTRATIONS + i),
                              data={"csrf_token": csrf, "email": email, "password": f"wrong {i}", "next": "/"})
                  for i in range(LOGINS)]
        keys = [client.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {api_key}", "Host": "demo.localhost",
                                                       **address(200 + i)}) for i in range(KEY_REQUESTS)]
        answers = await asyncio.gather(*registrations, *logins, *keys)
    return (list(answers[:REGISTRATIONS]), list(answers[REGISTRATIONS:REGISTRATIONS + LOGINS]),
            list(answers[REGISTRATIONS + LOGINS:]))


def test_sign_ins_beyond_the_bound_are_refused_at_once_and_keys_are_served(tmp_path: Path,
                                                                           server_pool: ServerPool) -> None:
    with scratch_database(tmp_path, "passwords") as url:
        server = server_pool.start("--json", ready=False, env=clean_env(
            PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true", PRISM_TRUSTED_PROXIES="127.0.0.1",
            PRISM_PASSWORD_CHECK_THREADS="1", PRISM_PASSWORD_CHECK_QUEUE="2", PRISM_WEBHOOK_WORKER_IN_PROCESS="false"))
        server.wait_ready(timeout=120)
        banner = server.banner_json(timeout=120)
        started = time.monotonic()
        registrations, logins, keys = asyncio.run(_storm(server.base_url, banner["admin_email"], banner["api_key"]))
        took = time.monotonic() - started
    answers = registrations + logins
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) <= {401, 503}, [a.text for a in answers if a.status_code not in (401, 503)]
    busy = [a for a in answers if a.status_code == 503]
    # The checks admitted at once, and a few more as they finish; the others refused without waiting.
    assert statuses.count(401) >= ADMITTED and len(busy) >= len(answers) // 2, statuses
    assert all(a.headers["Retry-After"] == "1" for a in busy)
    for answer in (a for a in registrations if a.status_code == 503):  # the endpoint's own error shape
        assert answer.json()["error"] == "password_checks_busy" and answer.json()["message"], answer.text
    assert all(a.headers["content-type"].startswith("text/html") for a in logins)  # a person reads the page
    assert max(a.elapsed.total_seconds() for a in busy) < 5, [a.elapsed for a in busy]
    assert [k.status_code for k in keys] == [200] * KEY_REQUESTS, [k.text for k in keys]
    assert took < 30, took
