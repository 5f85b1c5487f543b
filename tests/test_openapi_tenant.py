"""The tenant descriptor: GET /.well-known/openapi.json on a tenant host (OpenAPI 3.0.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate
from pydantic import BaseModel, Field

from prism.app import create_app
from prism.config import Settings
from prism.registry import HandlerApp, HandlerCall, Registry
from prism.registry.registry import build_registry
from tests.factories import Factory

PATH = "/.well-known/openapi.json"


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


async def test_anonymous_reader_gets_one_envelope_door_per_mega_tool(client: httpx.AsyncClient, app: Any,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace()
    response = await client.get(PATH, headers={"Host": ws.host})
    assert response.status_code == 200
    doc = response.json()
    validate(doc)
    assert doc["openapi"] == "3.0.3"
    assert doc["servers"][0]["url"] == f"http://{ws.host}"
    mega_tools = {h.coordinate.mega_tool for h in app.state.registry}
    assert set(doc["paths"]) == {f"/api/mcp/tools/prism_{m}/" for m in mega_tools}
    assert {"/api/mcp/tools/prism_entity_crud/", "/api/mcp/tools/prism_report_query/"} <= set(doc["paths"])
    body = doc["paths"]["/api/mcp/tools/prism_entity_crud/"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["required"] == ["app", "entity", "operation"]
    # Nothing about the apps behind the doors leaks to anonymous readers.
    assert "finance" not in response.text and "spare_part" not in response.text


async def test_key_holder_gets_every_handler_it_may_call_with_its_parameter_schema(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    doc = (await client.get(PATH, headers=ws.headers())).json()
    validate(doc)
    operation = doc["paths"]["/prism/entity_crud/finance/invoice/list"]["post"]
    assert operation["tags"] == ["entity_crud", "finance"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    # Optional[str] arrives as 3.0.3 `nullable`, never as a type array or anyOf with null.
    assert schema["properties"]["search"] == {
        "type": "string", "maxLength": 200, "nullable": True, "default": None,
        "description": "Case-insensitive text search.", "title": "Search"}
    assert schema["properties"]["status"]["enum"] == ["received", "approved", "disputed", "paid", "void", None]
    for node in _walk(doc):
        assert not isinstance(node.get("type"), list), node
        assert "$defs" not in node and "const" not in node
        assert isinstance(node.get("exclusiveMinimum", False), bool), node  # 3.0.3: a flag beside minimum
        if "$ref" in node:
            assert node["$ref"].startswith("#/components/"), node
    tag_names = {t["name"] for t in doc["tags"]}
    assert {"entity_crud", "report_query", "finance", "spare_parts"} <= tag_names


async def test_a_viewer_sees_only_what_it_may_call(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    owner = (await client.get(PATH, headers=ws.headers("owner"))).json()
    viewer = (await client.get(PATH, headers=ws.headers("viewer"))).json()
    assert "/prism/entity_crud/finance/invoice/create" in owner["paths"]
    assert "/prism/entity_crud/finance/invoice/create" not in viewer["paths"]
    assert "/prism/entity_crud/finance/invoice/list" in viewer["paths"]
    read_only = await factory.add_key(ws, "reader", scopes="mcp:read")
    reader = (await client.get(PATH, headers={"Authorization": f"Bearer {read_only}", "Host": ws.host})).json()
    assert all(op["post"]["x-prism-scope"] == "read" for path, op in reader["paths"].items()
               if path.startswith("/prism/"))


async def test_a_key_of_another_tenant_is_refused_on_this_tenant_host(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws, other = await factory.workspace(), await factory.workspace()
    response = await client.get(PATH, headers=ws.headers(host=other.host))
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_bad_credentials_and_unknown_tenants_get_clear_errors(client: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    ws = await factory.workspace()
    bad = await client.get(PATH, headers={"Host": ws.host, "Authorization": "Bearer ck_nottherealkey"})
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_token"
    unknown = await client.get(PATH, headers={"Host": "nosuchtenant.localhost"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "tenant_not_found"


async def test_servers_url_comes_from_configuration_not_forwarded_headers(app: Any, factory: Factory,
                                                                          settings: Settings) -> None:
    ws = await factory.workspace()
    configured = create_app(settings.model_copy(update={"public_scheme": "https", "public_port": 8443}),
                            registry=app.state.registry)
    async with configured.router.lifespan_context(configured):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=configured), base_url="http://x") as c:
            doc = (await c.get(PATH, headers={**ws.headers(), "X-Forwarded-Host": "evil.example",
                                              "X-Forwarded-Proto": "http"})).json()
    assert doc["servers"] == [{"url": f"https://{ws.host}:8443"}]


async def test_etag_is_strong_and_if_none_match_answers_304(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    first = await client.get(PATH, headers=ws.headers())
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    again = await client.get(PATH, headers={**ws.headers(), "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    listed = await client.get(PATH, headers={**ws.headers(), "If-None-Match": f'"other", W/{etag}'})
    assert listed.status_code == 304
    stale = await client.get(PATH, headers={**ws.headers(), "If-None-Match": '"stale"'})
    assert stale.status_code == 200 and stale.content == first.content
    anonymous = await client.get(PATH, headers={"Host": ws.host, "If-None-Match": etag})
    assert anonymous.status_code == 200 and anonymous.headers["etag"] != etag


class _PingParams(BaseModel):
    model_config = {"extra": "forbid"}
    note: str | None = Field(None, max_length=20)


def _registry_with_extra_handler() -> Registry:
    extra = HandlerApp("probes", description="Probes for the descriptor tests")

    @extra.handler("report_query", "probe", "echo", params=_PingParams, scope="read", permission=None,
                   description="Echo the note back.")
    async def echo(call: HandlerCall, params: _PingParams) -> dict[str, Any]:
        return {"note": params.note}

    registry = build_registry()
    registry.frozen = False
    registry.add_app(extra)
    return registry.freeze()


@pytest.fixture(scope="module")
async def extended_app(settings: Settings) -> AsyncIterator[Any]:
    application = create_app(settings, registry=_registry_with_extra_handler())
    async with application.router.lifespan_context(application):
        yield application


async def test_etag_changes_when_a_handler_is_added(client: httpx.AsyncClient, extended_app: Any,
                                                   factory: Factory) -> None:
    ws = await factory.workspace()
    before = await client.get(PATH, headers=ws.headers())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=extended_app), base_url="http://x") as c:
        after = await c.get(PATH, headers={**ws.headers(), "If-None-Match": before.headers["etag"]})
        called = await c.post("/prism/report_query/probes/probe/echo", headers=ws.headers(), json={"note": "hi"})
    assert after.status_code == 200
    assert after.headers["etag"] != before.headers["etag"]
    assert "/prism/report_query/probes/probe/echo" in after.json()["paths"]
    assert "/prism/report_query/probes/probe/echo" not in before.json()["paths"]
    assert called.json() == {"success": True, "data": {"note": "hi"}, "tool_name": "prism_report_query"}


async def test_descriptor_is_not_rate_limited(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    for _ in range(40):  # above the anonymous ceiling of 30 per minute
        assert (await client.get(PATH, headers={"Host": ws.host})).status_code == 200


async def test_gzip_and_identity_representations_have_their_own_strong_etags(client: httpx.AsyncClient,
                                                                             factory: Factory) -> None:
    ws = await factory.workspace()
    zipped = await client.get(PATH, headers={**ws.headers(), "Accept-Encoding": "gzip"})
    plain = await client.get(PATH, headers={**ws.headers(), "Accept-Encoding": "identity"})
    refused = await client.get(PATH, headers={**ws.headers(), "Accept-Encoding": "gzip;q=0"})
    assert zipped.headers["content-encoding"] == "gzip" and "content-encoding" not in plain.headers
    assert "content-encoding" not in refused.headers
    assert zipped.json() == plain.json()  # httpx decodes the gzip body
    assert zipped.headers["etag"] != plain.headers["etag"]
    assert "Accept-Encoding" in zipped.headers["vary"]
    # Either representation's tag revalidates: the version is what matters.
    crossed = await client.get(PATH, headers={**ws.headers(), "Accept-Encoding": "identity",
                                              "If-None-Match": zipped.headers["etag"]})
    assert crossed.status_code == 304 and crossed.headers["etag"] == plain.headers["etag"]
