"""What an upstream or a caller can send that used to end in a 500, a leak or a false outage: a declared charset
that decodes no text, a Content-Type that is not UTF-8, a failure whose text names the base URL with its key,
and a control character in a header argument (docs/integrations.md "Calls")."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from sqlalchemy import select

from prism.integrations.models import IntegrationCall
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.test_integrations_openapi_wire import (  # noqa: F401
    ANSWER,
    Recorder,
    call,
    connected,
    document,
    param,
    recorder_fixture,
    upstream_tls_fixture,
)
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")
TOKEN = "qs-token-SUPERSECRET-123"


@pytest.mark.parametrize("charset", ["base64", "hex", "undefined", "idna", "utf-8\xff"])
async def test_a_charset_that_decodes_no_text_is_read_as_utf8(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder, charset: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items": {"get": {"tags": ["items"], "operationId": "listItems", "responses": ANSWER}}})
    recorder.answer_type, recorder.answer_body = f"text/plain; charset={charset}", b"hello \xff"
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "items", "listItems", {})
    assert answered.status_code == 200, answered.text[:300]
    assert answered.json()["data"]["body"] == "hello \ufffd"


async def test_an_endpoint_answer_whose_content_type_is_not_utf8_is_passed_on(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Latin", "base_url": recorder.url()})
    recorder.answer_type, recorder.answer_body = "text/plain; name=caf\xe9", b"hello"
    status, body = await c.raw("integration_call", "integrations", "endpoint", "call",
                               {"id": endpoint["id"], "path": "/x"})
    assert status == 200, body
    assert body["data"]["content_type"].startswith("text/plain; name=caf\ufffd") and body["data"]["body"] == "hello"


async def test_a_header_argument_with_a_control_character_is_the_callers_error_not_an_outage(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items": {"get": {"tags": ["items"], "operationId": "listItems", "responses": ANSWER,
                                         "parameters": [param("X-Note", "header", {"type": "string"})]}}})
    name = await connected(client, ws, spec, recorder)
    refused = await call(client, ws, name, "items", "listItems", {"X-Note": "a\x01b"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
    assert recorder.received == []
    folded = await call(client, ws, name, "items", "listItems", {"X-Note": "a\r\nX-Injected: 1"})
    assert folded.status_code == 200, folded.text
    assert [r.header_values("x-injected") for r in recorder.received] == [[]]


@pytest.fixture
async def garbled(tls: TlsFiles) -> AsyncIterator[int]:
    """An HTTPS upstream answering with a header the client cannot parse: its error names the URL it asked."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert, tls.key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nX-Bad\x01Header: 1\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def test_a_key_in_the_base_urls_query_is_neither_answered_nor_recorded_when_the_upstream_fails(
        client: httpx.AsyncClient, factory: Factory, db: Database, garbled: int) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "qs_" + uuid.uuid4().hex[:8]
    spec = {"openapi": "3.0.3", "info": {"title": "Q", "version": "1"}, "paths": {"/items": {"post": {
        "tags": ["items"], "operationId": "addItem", "responses": {"200": {"description": "ok"}}}}}}
    await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": orjson.dumps(spec).decode()})
    await ok(client, ws, "config_manage/integrations/connection/set",
             {"name": name, "base_url": f"https://127.0.0.1:{garbled}/api?api_key={TOKEN}", "auth_kind": "none"})
    answered = await post(client, ws, f"integration_call/{name}/items/addItem", {})
    assert answered.status_code == 502 and answered.json()["error"] == "upstream_unreachable", answered.text
    async with db.read() as session:
        errors = list((await session.execute(select(IntegrationCall.error).where(
            IntegrationCall.organization_id == ws.org.id))).scalars())
    assert errors and errors[0]
    assert TOKEN not in answered.text and not any(TOKEN in e for e in errors), (answered.text, errors)
