"""Retry, timeout and webhook-verification rules of the Python client.

A scripted loopback server plays the misbehaving Prism (a 429 with Retry-After, a 503, a slow answer).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import httpx
import pytest
import stripe
from loopback import Reply, scripted
from prism_client import (
    AsyncPrismClient,
    PrismAPIError,
    PrismClient,
    PrismTimeoutError,
    RateLimitError,
    ServerError,
    WebhookSignatureError,
    construct_event,
    sign,
    verify_signature,
)

from prism.webhooks.signing import signature_header

PONG = {"service": "prism", "version": "v1", "status": "ok"}
LIMITED = {"error": "rate_limited", "message": "rate limit of 300 requests per minute reached; retry in 1 s"}
ENVELOPE_LIMITED = {"success": False, "tool_name": "prism_report_query", **LIMITED}


def test_a_429_with_retry_after_is_retried_after_the_announced_wait() -> None:
    with scripted(Reply(429, LIMITED, {"Retry-After": "1"}), Reply(200, PONG)) as server:
        with PrismClient(server.base_url, "ck_test", backoff_base=0) as prism:
            assert prism.ping() == PONG
    (_, _, first), (_, _, second) = server.seen
    assert second - first >= 0.95, "the client must wait the Retry-After seconds before retrying"


async def test_the_async_client_retries_a_429_on_the_canonical_path_too() -> None:
    ok = {"success": True, "data": {"total": 0}, "tool_name": "prism_report_query"}
    with scripted(Reply(429, ENVELOPE_LIMITED, {"Retry-After": "1"}), Reply(200, ok)) as server:
        async with AsyncPrismClient(server.base_url, "ck_test") as prism:
            assert await prism.dispatch("report_query", "finance", "invoice", "agingApSummary") == {"total": 0}
    assert [path for _, path, _ in server.seen] == ["/prism/report_query/finance/invoice/agingApSummary"] * 2
    assert server.seen[1][2] - server.seen[0][2] >= 0.95


@pytest.mark.parametrize("status", [502, 503, 504])
def test_transient_gateway_errors_are_retried_with_backoff(status: int) -> None:
    with scripted(Reply(status, {"error": "unavailable", "message": "try later"}), Reply(200, PONG)) as server:
        with PrismClient(server.base_url, backoff_base=0.05) as prism:
            assert prism.ping() == PONG
    assert len(server.seen) == 2


def test_retries_stop_after_max_retries_and_the_error_keeps_its_code_and_retry_after() -> None:
    with scripted(Reply(429, LIMITED, {"Retry-After": "0"})) as server:
        with PrismClient(server.base_url, max_retries=2) as prism, pytest.raises(RateLimitError) as limited:
            prism.ping()
    assert len(server.seen) == 3
    assert limited.value.code == "rate_limited" and limited.value.retry_after == 0


def test_a_503_to_a_call_sent_without_an_idempotency_key_is_raised_at_once() -> None:
    with scripted(Reply(503, {"error": "unavailable", "message": "try later"}), Reply(200, PONG)) as server:
        with PrismClient(server.base_url, backoff_base=0) as prism, pytest.raises(ServerError) as failed:
            prism.dispatch("entity_crud", "itsm", "ticket", "create", {"title": "x"}, idempotency_key=None)
    assert len(server.seen) == 1 and failed.value.status == 503


@pytest.mark.parametrize("key", ["", "clé", "ключ", "tab\tin-key", "k" * 256])
def test_an_idempotency_key_prism_would_refuse_is_refused_before_anything_is_sent(key: str) -> None:
    with scripted(Reply(200, PONG)) as server:
        with PrismClient(server.base_url) as prism, pytest.raises(ValueError, match="printable ASCII"):
            prism.call("prism_whoami", idempotency_key=key)
    assert server.seen == []


def test_a_key_of_255_printable_ascii_characters_is_sent_as_given() -> None:
    key = "order 42/" + "k" * 246
    with scripted(Reply(200, PONG)) as server:
        with PrismClient(server.base_url) as prism:
            prism.call("prism_whoami", idempotency_key=key)
    assert len(server.seen) == 1


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_from_in_front_of_prism_is_an_error_not_the_answer(status: int) -> None:
    # An http:// base URL behind TLS, say: the redirect page must not pass for the result of the call.
    moved = {"Location": "https://prism.example/api/v1/dev/me/"}
    with scripted(Reply(status, {"detail": "moved"}, moved)) as server:
        with PrismClient(server.base_url, "ck_test") as prism:
            with pytest.raises(PrismAPIError) as read:
                prism.me()
            with pytest.raises(PrismAPIError) as sent:
                prism.send_test_event("whk_1")
    assert read.value.status == status and read.value.code == "unexpected_redirect"
    assert "https://prism.example/api/v1/dev/me/" in read.value.message
    assert sent.value.code == "unexpected_redirect"
    assert len(server.seen) == 2, "a redirect is neither followed nor retried"


@pytest.mark.parametrize("base_url", ["localhost:8000", "ftp://127.0.0.1"])
def test_a_base_url_that_is_not_http_is_raised_at_once_not_retried_as_a_broken_connection(base_url: str) -> None:
    with PrismClient(base_url, backoff_base=5) as prism, pytest.raises(httpx.UnsupportedProtocol):
        prism.ping()


async def test_a_header_value_http_cannot_carry_is_raised_at_once_not_retried() -> None:
    with scripted(Reply(200, PONG)) as server:
        async with AsyncPrismClient(server.base_url, headers={"X-Note": "a\nb"}, backoff_base=5) as prism:
            with pytest.raises(httpx.LocalProtocolError):
                await prism.ping()
    assert server.seen == []


def test_other_errors_are_not_retried() -> None:
    with scripted(Reply(500, {"error": "internal_error", "message": "boom"})) as server:
        with PrismClient(server.base_url) as prism, pytest.raises(ServerError) as failed:
            prism.ping()
    assert len(server.seen) == 1 and failed.value.code == "internal_error"


def test_a_slow_answer_raises_a_timeout() -> None:
    with scripted(Reply(200, PONG, delay=1.5)) as server:
        started = time.monotonic()
        with PrismClient(server.base_url, timeout=0.3) as prism, pytest.raises(PrismTimeoutError):
            prism.ping()
    assert time.monotonic() - started < 1.4


def test_timeout_bounds_the_whole_attempt_when_the_answer_trickles_in() -> None:
    # Each byte comes well within the timeout, the whole answer well after it.
    with scripted(Reply(200, PONG, trickle=0.05)) as server:
        started = time.monotonic()
        with PrismClient(server.base_url, timeout=0.5) as prism, pytest.raises(PrismTimeoutError):
            prism.ping()
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


async def test_the_async_client_bounds_the_whole_attempt_too() -> None:
    with scripted(Reply(200, PONG, trickle=0.05)) as server:
        started = time.monotonic()
        async with AsyncPrismClient(server.base_url, timeout=0.5) as prism:
            with pytest.raises(PrismTimeoutError):
                await prism.ping()
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


def test_timeout_bounds_the_whole_attempt_when_the_headers_trickle_in() -> None:
    # A server (or something in front of it) dribbling its status line and headers: every byte comes well within
    # the timeout, the headers only after it; no body byte comes in time to start a clock of its own.
    with scripted(Reply(200, PONG, header_trickle=0.05)) as server:
        started = time.monotonic()
        with PrismClient(server.base_url, timeout=0.5) as prism, pytest.raises(PrismTimeoutError):
            prism.ping()
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


def test_timeout_bounds_late_headers_and_a_trickling_body_together() -> None:
    # Headers late by most of the timeout, then a body trickling: the wait for the headers counts too.
    with scripted(Reply(200, PONG, delay=0.4, trickle=0.05)) as server:
        started = time.monotonic()
        with PrismClient(server.base_url, timeout=0.5) as prism, pytest.raises(PrismTimeoutError):
            prism.ping()
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


@pytest.mark.parametrize("reply", [Reply(200, PONG, header_trickle=0.05), Reply(200, PONG, delay=0.4, trickle=0.05)],
                         ids=["headers-trickle", "late-headers-then-body-trickles"])
async def test_the_async_client_bounds_headers_and_body_together(reply: Reply) -> None:
    with scripted(reply) as server:
        started = time.monotonic()
        async with AsyncPrismClient(server.base_url, timeout=0.5) as prism:
            with pytest.raises(PrismTimeoutError):
                await prism.ping()
        elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


def test_an_answer_read_in_time_leaves_its_connection_usable() -> None:
    # The cut-off of a slow answer must never reach a connection back in the pool, serving the next call.
    with scripted(Reply(200, PONG)) as server:
        with PrismClient(server.base_url, timeout=0.3) as prism:
            for _ in range(3):
                assert prism.ping() == PONG
                time.sleep(0.35)
    assert len(server.seen) == 3


SECRET = "whk_secret_" + "a" * 40
BODY = json.dumps({"event_id": "dec_1", "event_type": "governance.decision.allow", "data": {}},
                  separators=(",", ":"), sort_keys=True).encode()


def test_verifier_accepts_what_prism_signs_and_agrees_with_stripe() -> None:
    now = int(time.time())
    header = signature_header([SECRET], BODY, now)  # Prism's own signer
    verify_signature(BODY, header, SECRET)
    assert construct_event(BODY, header, SECRET)["event_id"] == "dec_1"
    assert sign(BODY, SECRET, now) == header
    assert stripe.WebhookSignature.verify_header(BODY.decode(), sign(BODY, SECRET), SECRET, tolerance=300)


@pytest.mark.parametrize("header", [
    None, "", "t=abc,v1=00", "v1=deadbeef", "t=1",
])
def test_verifier_rejects_missing_or_malformed_headers(header: str | None) -> None:
    with pytest.raises(WebhookSignatureError):
        verify_signature(BODY, header, SECRET)


def test_verifier_rejects_a_tampered_body_a_wrong_secret_and_a_stale_timestamp() -> None:
    header = sign(BODY, SECRET)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        verify_signature(BODY + b" ", header, SECRET)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        verify_signature(BODY, header, SECRET + "x")
    stale = int(time.time()) - 301
    old = f"t={stale},v1=" + hmac.new(SECRET.encode(), f"{stale}.".encode() + BODY, hashlib.sha256).hexdigest()
    with pytest.raises(WebhookSignatureError, match="tolerance"):
        verify_signature(BODY, old, SECRET)
    verify_signature(BODY, old, SECRET, tolerance=600)
