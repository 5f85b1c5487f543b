"""The answer to "which handler does this?", as every door gives it: capability_search (prism_introspect) and
the `prism_search` utility tool, over the canonical door, MCP and the sandbox alike — one function, so they
cannot differ.

`prism_search` answers in one round trip what an agent needs for its next message: each result carries its
argument schema and a call recipe with what the request itself says filled in (a record number, an e-mail
address), and a request of several acts gets an ordered plan (`capability_path`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator

from prism.apps.params import Params
from prism.registry.capability import UUID, Scored, find, irreversible
from prism.registry.mega_tools import SCOPE_OF_CLASS
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.schema_reading import keywords_of, list_of, mapping_of
from prism.registry.search import index_for

# A request's numbers ("ticket 5520", "PO #881"), record UUIDs and e-mail addresses: what a recipe can fill
# without guessing, when the request says only one of a kind.
_NUMBER = re.compile(r"(?<![\w.,$-])#?(\d{1,12})\b(?![.,:/-]\d)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


class SearchParams(Params):
    query: str = Field(..., min_length=1, max_length=500, description="What you want done, in plain words.")
    limit: int = Field(5, ge=1, le=20, description="How many handlers to return.")
    mega_tool: str | None = Field(None, max_length=64, description="Only handlers of this mega-tool.")
    app: str | None = Field(None, max_length=64, description="Only handlers of this app.")
    entity: str | None = Field(None, max_length=64, description="Only handlers of this entity.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must say what you want done")
        return value.strip()


def capability_answer(registry: Registry, visible: tuple[Handler, ...], enabled: frozenset[str], query: str, *,
                      limit: int, rerank: bool, accept: Callable[[Handler], bool] | None, with_schemas: bool,
                      recipe: Callable[[Handler], dict[str, Any]]) -> dict[str, Any]:
    """Ranked handlers with their confidence, `no_match`, the ranker that ran and the plan (if any). `enabled`: the
    integrations the caller's organization enabled, whose handlers (with the built-in ones) make the corpus whose
    statistics it ranks with (prism.registry.corpus)."""
    found = find(index_for(registry).view(enabled), query, visible, limit=limit, rerank=rerank, accept=accept)
    results = [_result(rank, hit, query, with_schemas, recipe) for rank, hit in enumerate(found.hits, start=1)]
    plan = [{"step": i, **_result(i, step, query, with_schemas, recipe)} for i, step in enumerate(found.plan, start=1)]
    for entry in plan:
        del entry["rank"]
    return {"query": query, "ranker": found.ranker, "no_match": found.no_match,
            "asks_irreversible": found.asks_irreversible, "count": len(results), "results": results,
            "capability_path": plan}


def _result(rank: int, hit: Scored, query: str, with_schemas: bool,
            recipe: Callable[[Handler], dict[str, Any]]) -> dict[str, Any]:
    h = hit.handler
    c = h.coordinate
    entry: dict[str, Any] = {
        "rank": rank, "coordinate": c.path,
        "parts": {"mega_tool": c.mega_tool, "app": c.app, "entity": c.entity, "operation": c.operation},
        "score": round(hit.score, 4), "confidence": round(hit.confidence, 3), "description": h.description,
        "required_permission": h.permission, "required_scope": SCOPE_OF_CLASS[h.scope],
        "read_only": h.read_only, "destructive": h.destructive, "irreversible": irreversible(h)}
    call = recipe(h)
    if with_schemas:
        entry["parameters"] = h.schema
        call = filled(call, h.schema, query)
    entry["recipe"] = call
    return entry


def filled(call: dict[str, Any], schema: dict[str, Any], query: str) -> dict[str, Any]:
    """The recipe with what the request says put in: its one number into the one required identifier (`id` or
    `<something>_id`), its one e-mail address into the one e-mail parameter. A placeholder
    it fills leaves `fill`; anything the request does not say stays a placeholder."""
    props = mapping_of(schema, "properties")
    arguments = dict(call["http"]["body"]["arguments"])
    fill = list(call["fill"])
    uuids = UUID.findall(query)
    numbers = uuids or _NUMBER.findall(query)  # a record's UUID names it better than any number beside it
    emails = _EMAIL.findall(query)
    ids = [n for n in arguments
           if (n == "id" or n.endswith("_id")) and _type(props.get(n, {})) in ("integer", "string")]
    if len(set(numbers)) == 1 and len(ids) == 1 and (_type(props[ids[0]]) == "string" or not uuids):
        arguments[ids[0]] = numbers[0] if _type(props[ids[0]]) == "string" else int(numbers[0])
        if ids[0] in fill:
            fill.remove(ids[0])
    mail = [n for n in props if "email" in n.lower() or keywords_of(props[n]).get("format") == "email"]
    if len(set(emails)) == 1 and len(mail) == 1 and _type(props[mail[0]]) == "string":
        arguments[mail[0]] = emails[0]
        if mail[0] in fill:
            fill.remove(mail[0])
    body = {**call["http"]["body"], "arguments": arguments}
    return {**call, "http": {**call["http"], "body": body},
            "sandbox": {**call["sandbox"], "body": {**call["sandbox"]["body"], "arguments": body}}, "fill": fill}


def _type(spec: Any) -> str | None:
    kind = keywords_of(spec).get("type")
    if kind is None:  # Optional[X]: anyOf [X, null]
        kinds = [s.get("type") for s in list_of(spec, "anyOf") if isinstance(s, dict) and s.get("type") != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None
