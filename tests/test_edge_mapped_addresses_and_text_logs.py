"""A server listening on `::` (dual-stack) sees an IPv4 peer as `::ffff:a.b.c.d`: trusted proxies and the metrics
allowlist, written as IPv4 networks, still match it. And a text log line cannot be forged through what a client
sends (a decoded %0A in the path): every control character of a line's message and values is escaped."""

from __future__ import annotations

import io
import sys
from typing import Any

import httpx
import pytest

from prism.config import Settings
from prism.kit.networks import parse_networks
from prism.observability.scrape import MetricsAccess
from prism.ratelimit.addresses import AddressResolver
from tests.factories import Factory
from tests.limits_support import client_for, limited_app


def _through(app: Any, peer: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(peer, 40000)), base_url="http://localhost")


def test_a_mapped_address_is_the_ipv4_address_it_maps() -> None:
    resolver = AddressResolver(parse_networks("10.0.0.0/8"))
    assert resolver.resolve("::ffff:10.0.0.1", ["198.51.100.7"]) == "198.51.100.7"
    assert resolver.resolve("10.0.0.1", ["198.51.100.7, ::ffff:10.0.0.2"]) == "198.51.100.7"
    assert resolver.resolve("::ffff:192.0.2.1", ["198.51.100.7"]) == "::ffff:192.0.2.1"  # not a proxy of ours
    access = MetricsAccess(Settings(database_url="sqlite://"))  # the default allowlist, 127.0.0.1 and ::1
    assert access.allows(None, "::ffff:127.0.0.1") and not access.allows(None, "::ffff:192.0.2.1")
    # A network written in its mapped form holds the same addresses; both settings take `;` as a separator.
    assert AddressResolver(parse_networks("::ffff:10.0.0.0/104")).resolve("::ffff:10.0.0.1", ["203.0.113.9"]) \
        == "203.0.113.9"
    listed = MetricsAccess(Settings(database_url="sqlite://", metrics_allow="127.0.0.1;::ffff:10.0.0.0/104"))
    assert listed.allows(None, "10.0.0.7") and listed.allows(None, "::ffff:10.0.0.7")


async def test_one_client_behind_a_dual_stack_proxy_does_not_lock_out_the_others(
        settings: Settings, app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with limited_app(settings, app, trusted_proxies="10.0.0.0/8") as limited:
        async with _through(limited, "::ffff:10.0.0.1") as proxy:
            for _ in range(10):  # 198.51.100.1 guesses until it is locked out
                guess = await proxy.get("/api/v1/dev/me/", headers={
                    "Authorization": "Bearer ck_" + "z" * 40, "Host": ws.host, "X-Forwarded-For": "198.51.100.1"})
                assert guess.status_code == 401, guess.text
            other = await proxy.get("/api/v1/dev/me/", headers={**ws.headers(), "X-Forwarded-For": "198.51.100.2"})
            assert other.status_code == 200, other.text


async def test_a_text_log_line_cannot_be_forged_through_the_path(
        settings: Settings, app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    forged = "2026-12-01 14:00:00,000 WARNING prism.security locked_out address=10.9.9.9"
    async with limited_app(settings, app, log_format="text") as limited, client_for(limited) as c:
        await c.get("/x%0A" + forged.replace(" ", "%20"))
    lines = out.getvalue().splitlines()
    assert not any(line.startswith(forged[:23]) for line in lines), lines
    assert any("/x\\x0a2026-12-01" in line for line in lines), lines


def test_a_traceback_in_a_text_log_cannot_forge_a_record_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception's text may carry what a client sent; its traceback follows the record, each line indented and
    escaped, so no line of it reads as a record of its own."""
    import logging

    from prism.observability.logs import TextFormatter

    forged = "2026-12-01 14:00:00,000 WARNING prism.security locked_out address=10.9.9.9"
    try:
        raise ValueError(f"bad value x\n{forged}\r\n{forged}\x1b[2K")
    except ValueError:
        record = logging.LogRecord("prism.test", logging.ERROR, __file__, 1, "it failed", None, sys.exc_info())
    lines = TextFormatter().format(record).split("\n")
    assert lines[0].endswith("ERROR prism.test it failed") and len(lines) > 3, lines
    assert all(line.startswith("  ") for line in lines[1:]), lines
    assert not any(line.startswith(forged[:23]) for line in lines), lines
    assert any("\\x1b[2K" in line for line in lines), lines
