"""A call of an imported operation: checked in the ledger transaction, sent after it commits, recorded.

The request goes through Prism's guarded outbound client (prism.kit.outbound: private and metadata addresses
refused unless the serving app allows private networks, no redirects, no proxies, bounded reads). Only
idempotent methods are retried, on a connection failure or a 502/503/504. Every attempt's outcome is kept in
`integration_calls`; a failure reaches the caller as a refusal with the upstream's status in `details`.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode
from weakref import WeakKeyDictionary

import orjson

from prism.config import Settings
from prism.errors import InvalidArguments
from prism.integrations import serialize
from prism.integrations.call_records import connection_for, keep_record
from prism.integrations.credentials import Credential, open_secret, withheld
from prism.integrations.failures import without_credentials
from prism.integrations.openapi import offered_header
from prism.integrations.upstream_error import UpstreamError
from prism.kit.canonical import digest
from prism.kit.header_values import sendable
from prism.kit.outbound import OutboundAnswer, OutboundClient, OutboundFailed, OutboundTimeout
from prism.registry import AfterCommit, HandlerCall

MAX_RESPONSE = 2_000_000
EXCERPT = 1000
# orjson encodes at most 254 levels of nesting; the doors put an answer a few levels down (the envelope, a
# JSON-RPC result), so an answer may nest this deep to reach the caller whole.
MAX_ANSWER_DEPTH = 200
_ENCODER_DEPTH = 254
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUSES = frozenset({502, 503, 504})
RETRY_DELAYS = (0.2, 0.5)
USER_AGENT = "Prism-Integration/1.0"
# Path parameter values a URL resolves away (`a/../b` is `b`), or that make `//`: never sent.
DOT_SEGMENTS = frozenset({"", ".", ".."})


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str
    path: str  # without the query string: what the call record keeps
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Sent:
    answer: OutboundAnswer | None
    error: str
    timed_out: bool
    attempts: int
    duration_ms: int


def build_request(operation: dict[str, Any], base_url: str, arguments: dict[str, Any]) -> Request:
    """The upstream request, its URL already percent-encoded (sent as it is: prism.kit.outbound `encoded`)."""
    path = operation["path"]
    query: list[tuple[str, str]] = []
    # JSON first; any other media type the operation answers with is taken too (a CSV export, say).
    headers: dict[str, str] = {"User-Agent": USER_AGENT, "Accept": "application/json, */*;q=0.1"}
    for parameter in operation["parameters"]:
        if parameter["arg"] not in arguments:
            continue
        value = arguments[parameter["arg"]]
        if parameter["in"] == "path":
            text = serialize.path_value(parameter, value)
            if text in DOT_SEGMENTS:  # resolving the URL would move the request to another path, the base's too
                raise InvalidArguments(f"{parameter['arg']}: a path parameter cannot be empty, '.' or '..'",
                                       field=parameter["arg"])
            path = path.replace("{" + parameter["name"] + "}", text)
        elif parameter["in"] == "query":
            query += serialize.query_pairs(parameter, value)
        elif offered_header(parameter["name"]):  # as when it was imported, unless it was stored before the rule
            text = serialize.header_value(parameter, value)
            if not sendable(text):  # the HTTP client would refuse it on every attempt, as if the upstream were down
                raise InvalidArguments(f"{parameter['arg']}: a header value cannot hold a control character",
                                       field=parameter["arg"])
            headers[parameter["name"]] = text
    body = b""
    spec = operation.get("body")
    if spec is not None and spec["arg"] in arguments:
        value, media = arguments[spec["arg"]], spec["media_type"]
        headers["Content-Type"] = media
        if media == "application/x-www-form-urlencoded" and isinstance(value, dict):
            body = urlencode(serialize.form_pairs(value)).encode()
        elif media.startswith("text/"):
            body = serialize.scalar(value).encode()
        else:
            body = orjson.dumps(value)
    # The outbound client's URL type, imported on the first call: building the app imports no HTTP client.
    from yarl import URL

    # A base URL's own query string (`?api_key=...`: how some services take their key) is sent first, with the
    # operation's parameters after it; the path recorded in `integration_calls` has neither.
    base = URL(base_url)
    full_path = str(base.with_query(None).with_fragment(None)).rstrip("/") + path
    sent_query = "&".join(filter(None, (base.raw_query_string, urlencode(query))))
    return Request(operation["method"], full_path + ("?" + sent_query if sent_query else ""), full_path, headers, body)


# OAuth 2 client-credentials tokens, per connection and secret: (access token, monotonic expiry). At most
# TOKENS_KEPT: each change of a connection's credential asks for another token, and the old one is never asked
# for again, so without a bound they would pile up for the life of the process.
_TOKENS: dict[tuple[str, str], tuple[str, float]] = {}
TOKENS_KEPT = 1024


def _keep_token(key: tuple[str, str], access: str, expires: float) -> None:
    _TOKENS.pop(key, None)  # re-inserted: the dict's order is the order tokens were obtained in
    _TOKENS[key] = (access, expires)
    if len(_TOKENS) > TOKENS_KEPT:
        now = time.monotonic()
        for expired in [k for k, (_, until) in _TOKENS.items() if until <= now]:
            del _TOKENS[expired]
        while len(_TOKENS) > TOKENS_KEPT:  # still too many alive: the oldest go (asked for again if needed)
            del _TOKENS[next(iter(_TOKENS))]


def _token_key(connection_id: str, credential: Credential) -> tuple[str, str]:
    # A token answers for what it was asked with: another token URL, client or scope asks again.
    asked = (credential.settings.get("token_url"), credential.settings.get("client_id"),
             credential.settings.get("scope"), credential.secret)
    return connection_id, hashlib.sha256(orjson.dumps(asked)).hexdigest()


def issued_token(connection_id: str, credential: Credential) -> str | None:
    """The OAuth access token this process holds for the connection's credential (expired or not), if any."""
    held = _TOKENS.get(_token_key(connection_id, credential))
    return held[0] if held is not None else None


def forget_token(connection_id: str, credential: Credential) -> None:
    """The connection's access token, which the upstream stopped accepting before it said it expires (revoked, or
    its server restarted with new keys): the next request asks for another."""
    _TOKENS.pop(_token_key(connection_id, credential), None)


async def _oauth_token(client: OutboundClient, connection_id: str, credential: Credential,
                       timeout_seconds: float) -> str:
    key = _token_key(connection_id, credential)
    cached = _TOKENS.get(key)
    if cached is not None and cached[1] > time.monotonic():
        return cached[0]
    form = {"grant_type": "client_credentials", "client_id": credential.settings["client_id"],
            "client_secret": credential.secret}
    if credential.settings.get("scope"):
        form["scope"] = credential.settings["scope"]
    answer = await client.send("POST", credential.settings["token_url"], headers={
        "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
        "User-Agent": USER_AGENT}, body=urlencode(form).encode(), timeout_seconds=timeout_seconds,
        read_at_most=65536)
    try:
        token = orjson.loads(answer.body) if answer.status == 200 else {}
    except orjson.JSONDecodeError:
        token = {}
    access = token.get("access_token") if isinstance(token, dict) else None
    if not isinstance(access, str) or not access:
        raise OutboundFailed(f"the token endpoint refused the client credentials (HTTP {answer.status})")
    lifetime = token.get("expires_in")
    seconds = float(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else 300.0
    _keep_token(key, access, time.monotonic() + max(seconds - 30.0, 1.0))
    return access


# One outbound client per event loop and outbound policy: its connections are kept alive between calls, so a
# call to a service answered recently costs no new TCP and TLS handshake.
_CLIENTS: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[bool, str | None], OutboundClient]] = (
    WeakKeyDictionary())
MAX_CONNECTIONS = 100


def shared_client(settings: Settings) -> OutboundClient:
    clients = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    key = (settings.webhook_allow_private_networks, settings.webhook_ca_bundle)
    client = clients.get(key)
    if client is None:
        client = clients[key] = OutboundClient(allow_private_networks=key[0], ca_bundle=key[1],
                                               max_connections=MAX_CONNECTIONS)
    return client


async def close_clients() -> None:
    """At shutdown: close this loop's clients (their kept-alive connections)."""
    for client in _CLIENTS.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


async def send(settings: Settings, connection_id: str, credential: Credential, request: Request,
               timeout_seconds: float, *, base_url: str) -> Sent:
    """`request` sent (retried when idempotent); its answer with the credential and the keys written into the
    connection's `base_url` withheld, so neither its body nor its excerpt hands them on."""
    started = time.monotonic()
    attempts, answer, error, timed_out = 0, None, "", False
    retries = RETRY_DELAYS if request.method in IDEMPOTENT else ()
    client = shared_client(settings)
    # A failure's text may name the URL (aiohttp's do, with its query string): it reaches the caller and the record.
    urls = (request.url, str(credential.settings.get("token_url") or ""))
    for delay in (*retries, None):
        attempts += 1
        answer, error, timed_out, bearer = None, "", False, None
        try:
            bearer = (await _oauth_token(client, connection_id, credential, timeout_seconds)
                      if credential.kind == "oauth2_client_credentials" else None)
            answer = await client.send(request.method, request.url,
                                       headers=with_credential(request.headers, credential.headers(bearer)),
                                       body=request.body, timeout_seconds=timeout_seconds,
                                       read_at_most=MAX_RESPONSE, encoded=True)
            answer = replace(answer, body=withheld(answer.body, credential=credential, bearer=bearer,
                                                   urls=(base_url,)))
        except OutboundTimeout as exc:
            error, timed_out = without_credentials(str(exc), urls=urls, credential=credential, bearer=bearer), True
            break  # the upstream may still be working on it: a timeout is not retried
        except OutboundFailed as exc:
            error = without_credentials(str(exc), urls=urls, credential=credential, bearer=bearer)
        if (answer is not None and answer.status not in RETRY_STATUSES) or delay is None:
            break
        await asyncio.sleep(delay)
    return Sent(answer, error, timed_out, attempts, int((time.monotonic() - started) * 1000))


def with_credential(headers: dict[str, str], credential: dict[str, str]) -> dict[str, str]:
    """The request's headers and the connection's credential, which wins: a header argument named as the
    credential's header, in whatever case, is not sent (HTTP names are case-insensitive; an upstream that read
    the caller's copy would take a credential the caller chose)."""
    carried = {name.lower() for name in credential}
    return {**{name: value for name, value in headers.items() if name.lower() not in carried}, **credential}


def _decoded(answer: OutboundAnswer) -> Any:
    if not answer.body:
        return None
    if "json" in answer.headers.get("content-type", ""):
        try:
            return orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            pass
    try:
        return answer.body.decode(_charset(answer.headers.get("content-type", "")), errors="replace")
    except (LookupError, UnicodeError, ValueError):  # a codec that decodes no text (base64, rot13, undefined, idna)
        return answer.body.decode("utf-8", errors="replace")


def _charset(content_type: str) -> str:
    """The answer's declared charset, when Python knows it; UTF-8 otherwise."""
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"')).name
            except (LookupError, UnicodeError):  # unknown, or not even ASCII
                break
    return "utf-8"


async def call_operation(operation: dict[str, Any], call: HandlerCall, params: Any) -> AfterCommit[Sent]:
    """The handler of every imported OpenAPI operation (bound to its operation with functools.partial)."""
    assert call.handler.integration is not None
    connection = await connection_for(call, call.handler.integration)
    arguments = params.model_dump()
    credential = Credential(connection.auth_kind, dict(connection.auth_settings),
                            open_secret(call.settings, connection.id, connection.secret_encrypted))
    request = build_request(operation, connection.base_url, arguments)
    settings, connection_id, timeout = call.settings, connection.id, float(connection.timeout_seconds)
    base_url, arguments_digest = connection.base_url, digest(arguments)

    async def go() -> Sent:
        return await send(settings, connection_id, credential, request, timeout, base_url=base_url)

    async def record(done: HandlerCall, sent: Sent) -> Any:
        return await record_call(done, request.method, request.path, arguments_digest, sent)

    return AfterCommit(go, record)


def unpassable_refusal(decoded: Any, upstream_status: int | None) -> UpstreamError | None:
    """The refusal of a decoded answer the doors could not encode (nested deeper than MAX_ANSWER_DEPTH, an
    integer past 64 bits), found before the call is recorded as `ok`; None for one that passes."""
    wrapped = decoded
    for _ in range(_ENCODER_DEPTH - MAX_ANSWER_DEPTH):  # the doors' levels above the answer, and then some
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        return UpstreamError(f"the upstream's answer cannot be passed on ({exc}): Prism passes on JSON nested at "
                             f"most {MAX_ANSWER_DEPTH} levels deep, with integers within 64 bits",
                             code="upstream_error", status=502, details={"upstream_status": upstream_status})
    return None


async def record_call(call: HandlerCall, method: str, path: str, arguments_digest: str, sent: Sent) -> Any:
    """Keeps the outcome and answers the caller: the upstream's data, or a refusal naming its status."""
    answer = sent.answer
    status = answer.status if answer is not None else None
    refusal = _refusal(sent)
    body = None
    if refusal is None and answer is not None:
        body = _decoded(answer)
        refusal = unpassable_refusal(body, status)
    await keep_record(call, method=method, path=path, arguments_digest=arguments_digest, upstream_status=status,
                      outcome="ok" if refusal is None else refusal.code, attempts=sent.attempts,
                      duration_ms=sent.duration_ms, error=refusal.message if refusal is not None else "")
    if refusal is not None:
        return refusal
    assert answer is not None
    return {"status": answer.status, "body": body}


def _refusal(sent: Sent) -> UpstreamError | None:
    """What the upstream's status (or its silence) says, before its answer is read."""
    answer = sent.answer
    if answer is None and sent.timed_out:
        return UpstreamError(f"the upstream did not answer in time ({sent.error})", code="upstream_timeout",
                             status=504, details={"upstream_status": None})
    if answer is None:
        return UpstreamError(f"the upstream could not be reached: {sent.error}", code="upstream_unreachable",
                             status=502, details={"upstream_status": None, "attempts": sent.attempts})
    if answer.truncated:
        return UpstreamError(f"the upstream's answer is larger than {MAX_RESPONSE} bytes",
                             code="upstream_response_too_large", status=502,
                             details={"upstream_status": answer.status})
    if not 200 <= answer.status < 300:
        excerpt = answer.body[:EXCERPT].decode("utf-8", errors="replace")
        return UpstreamError(f"the upstream answered HTTP {answer.status}", code="upstream_error", status=502,
                             details={"upstream_status": answer.status, "upstream_body": excerpt})
    return None
