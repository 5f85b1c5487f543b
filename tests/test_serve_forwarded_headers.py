"""`prism serve` leaves X-Forwarded-* to Prism: the client address is the peer unless PRISM_TRUSTED_PROXIES says
otherwise. (Uvicorn's own proxy-header handling trusts loopback by default and would rewrite the address first:
a client on the same host could then pick a new address for every failed attempt and never be locked out.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import Server, ServerPool, clean_env, scratch_database


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log_dir = tmp_path_factory.mktemp("forwarded")
    with scratch_database(log_dir, "forwarded") as url:
        pool = ServerPool(log_dir)
        try:  # no PRISM_TRUSTED_PROXIES: nobody's X-Forwarded-For counts
            yield pool.start(env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false"))
        finally:
            pool.stop_all()


async def test_failed_attempts_lock_out_the_peer_whatever_address_each_one_claims(server: Server) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        for _ in range(10):
            claimed = {"X-Forwarded-For": f"2001:db8::{uuid.uuid4().hex[:4]}", "X-Forwarded-Proto": "https",
                       "Authorization": "Bearer ck_" + "z" * 40}
            assert (await client.get("/api/v1/dev/me/", headers=claimed)).status_code == 401
        blocked = await client.get("/api/v1/dev/ping/")
    assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_failed_attempts"
