"""The developer guide served by introspection (`dimension=guide`).

Written for a caller that has only a key and this endpoint: the overview says what Prism is and
where to go next; the quickstart is built from the handlers the caller may actually call, so every
command in it works as printed for that key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from prism.auth.context import AuthContext
from prism.errors import NotFound
from prism.registry.mega_tools import MEGA_TOOLS, SCOPE_OF_CLASS
from prism.registry.model import Handler
from prism.registry.paths import TreeView

Recipe = Callable[[Handler], dict[str, Any]]
Section = tuple[str, str]

TOPICS: dict[str, tuple[str, str]] = {
    "quickstart": ("Quickstart", "From a key to a first real call, with commands built for your key."),
    "authentication": ("Authentication", "Bearer keys, scopes, roles and organizations."),
    "dispatch": ("Dispatch", "The doors, the request envelope and what every call goes through."),
    "errors": ("Errors", "Statuses, machine codes and body shapes."),
    "introspection": ("Introspection", "Every dimension of this endpoint and its parameters."),
    "pagination": ("Pagination", "items/page/page_size/total, ordering, search and filters."),
    "audit": ("Audit", "The hash-chained ledger every call is written to, and how to verify it."),
}

OVERVIEW: list[Section] = [
    ("What Prism is",
     "Prism gives agents and programs governed access to business operations. Every operation is a typed "
     "handler, and every call — whichever door it comes through — goes through one dispatcher that checks "
     "the credential's scopes and role, confines data to the credential's organization, and writes the call "
     "to the organization's hash-chained audit ledger."),
    ("The tree",
     "Handlers form a tree: mega-tool → app → entity → operation, for example "
     "entity_crud/spare_parts/spare_part/list. There are 13 mega-tools; on the wire each is the tool "
     "prism_<mega_tool> (prism_entity_crud, prism_report_query, ...). The utility tools prism_whoami, "
     "prism_introspect and prism_search take flat parameters; prism_search {query} answers which handler does "
     "a task, with its argument schema and a ready call."),
    ("The doors",
     "POST /api/mcp/tools/prism_<mega_tool>/ with {app, entity, operation, arguments} answers the envelope "
     "{success, data | error, message, tool_name}. POST /prism/{mega_tool}/{app}/{entity}/{operation} takes "
     "the handler's own parameters as body and answers the same envelope. The developer sandbox "
     "(/api/v1/dev/ping/, me/, tools/, introspect/, call/) answers bare results. All doors share one "
     "dispatcher, so a call behaves the same through each."),
    ("Authentication",
     "Send Authorization: Bearer <key>. A key belongs to one user in one organization and carries scopes "
     "(mcp:read, mcp:write, mcp:execute); the user's role decides the app permissions. Introspection only "
     "shows handlers the key may call."),
    ("Errors",
     "400 bad arguments (details.errors name each field), 401 missing or invalid key, 403 permission_denied, "
     "404 tool_not_found / operation_not_found / not_found, 409 conflicts and invalid state transitions, "
     "429 rate limited (Retry-After). Client input never yields a 500."),
]

TEXT: dict[str, list[Section]] = {
    "authentication": [
        ("Sending the key",
         "Every call except GET /api/v1/dev/ping/ needs Authorization: Bearer <key>. A 401 answer carries "
         "WWW-Authenticate: Bearer and the code authentication_required or invalid_token (unknown, revoked "
         "or expired key)."),
        ("Keys",
         "An operator mints a key with `prism key create --tenant SUB --email E [--org ORG] [--scopes ...] "
         "[--expires-days D]`. The plaintext is shown once; Prism stores only its hash. A key belongs to one "
         "user and one organization: everything it reads or writes lives in that organization, and another "
         "organization's records are simply not found (404)."),
        ("Scopes",
         "mcp:read: list, read, search, count, reports, whoami and introspect. mcp:write: create, update, "
         "delete. mcp:execute: workflow, smart, agent, integration, mission and notification operations. "
         "A key without scopes named gets all three."),
        ("Roles and permissions",
         "A handler needs the permission <app>.<verb>_<entity> (verb: view, add, change or delete). Built-in "
         "roles: owner and admin may do everything, member may view, add and change, viewer may only view. "
         "A call needs both the scope and the permission; otherwise it answers 403 permission_denied."),
        ("Hosts",
         "Each workspace has its own host, <subdomain>.<base domain>. A key of another workspace is refused "
         "there (401)."),
    ],
    "dispatch": [
        ("Canonical door",
         "POST /api/mcp/tools/prism_<mega_tool>/ with {\"app\", \"entity\", \"operation\", \"arguments\"}; the "
         "same fields wrapped in {\"kwargs\": {...}} are accepted too. The answer is always "
         "{success, data, tool_name} or {success: false, error, message, tool_name}."),
        ("Per-handler door",
         "POST /prism/{mega_tool}/{app}/{entity}/{operation} with the handler's parameters as the body (an "
         "empty body means no parameters). Same envelope as the canonical door."),
        ("Sandbox door",
         "POST /api/v1/dev/call/ with {\"name\": \"prism_<mega_tool>\", \"arguments\": {app, entity, operation, "
         "arguments}} answers the bare result on success and {error, message, tool_name} with a non-2xx "
         "status on failure. Utility tools take flat arguments: {\"name\": \"prism_introspect\", "
         "\"arguments\": {\"dimension\": \"stats\"}}."),
        ("What every call goes through",
         "1. the coordinate is resolved (404 operation_not_found); 2. scope and role permission are checked "
         "(403 permission_denied), before anything about the arguments is said; 3. arguments are validated "
         "against the handler's schema, unknown fields refused (400 invalid_arguments); 4. the handler runs "
         "inside the key's organization, in one "
         "transaction; 5. the call — allowed or refused — is appended to the audit ledger before the answer "
         "is sent."),
        ("Finding what to call",
         "introspect dimension=capability_search with a plain-language query returns ranked handlers with a "
         "ready call recipe; dimension=schema with an operation returns its parameters."),
    ],
    "errors": [
        ("Statuses",
         "400 invalid_arguments, missing_name, missing_body, invalid_json, ambiguous_operation; 401 "
         "authentication_required, invalid_token; 403 permission_denied; 404 tool_not_found, "
         "operation_not_found, not_found, tenant_not_found (and node_not_found, topic_not_found here); "
         "409 conflict, invalid_transition; 413 body over 1 MiB; 429 rate limited, with Retry-After in "
         "seconds; 502/503/504 transient, safe to retry with backoff."),
        ("Body shapes",
         "Canonical and per-handler doors: {success: false, error, message, tool_name}. Sandbox call: "
         "{error, message, tool_name}. Other sandbox endpoints: {error, message}. Every 400 lists its problems "
         "in `details.errors`, one {field, message} each (`field` is `arguments` or `body` when the whole "
         "input is at fault)."),
        ("Retrying",
         "Retry 429 (after Retry-After) and 502/503/504. Do not retry 4xx answers unchanged: they will fail "
         "the same way."),
    ],
    "introspection": [
        ("Endpoint",
         "GET /api/v1/dev/introspect/ with query parameters, or POST with the same parameters as a JSON body; "
         "with or without the trailing slash. The tool prism_introspect takes the same parameters. Everything "
         "it returns is limited to handlers the key may call."),
        ("Dimensions",
         "mega_tools (default): the mega-tools you can use, with counts. apps, entities, operations: the next "
         "levels, narrowed by mega_tool, app and entity. schema: one operation's parameters, hints, "
         "permission and a call recipe (needs operation). stats: counts. handlers: a flat paged list "
         "(page, limit). capability_search: ranked handlers for a plain-language query (query, limit, "
         "rerank). capability_path: how two nodes connect (from_node, to_node). guide: this guide (topic)."),
        ("Search",
         "capability_search ranks with BM25 over coordinates, descriptions and keywords, with stemming and "
         "synonyms. rerank=true adds a finer pass over the best candidates: lexical (word coverage, word "
         "pairs, proximity, exact coordinate mentions) fused with the cosine of static word embeddings "
         "(WordLlama, run locally), which also brings in handlers described in other words than the "
         "query's. Without the optional semantic extra the pass is lexical alone; `ranker` in the answer "
         "says which ran (bm25, bm25+lexical-rerank or bm25+semantic-rerank)."),
    ],
    "pagination": [
        ("Shape",
         "List operations answer {items, page, page_size, total}: items is one page of records, page is "
         "1-based, total counts every match."),
        ("Parameters",
         "page (default 1), page_size (default 20, at most 100), ordering (a field name; prefix '-' for "
         "descending; an unknown field answers 400 naming the allowed ones), search (case-insensitive text), "
         "and the filters each list operation declares — see its schema. Ties are broken by id, so pages "
         "never overlap or skip records."),
        ("Walking all pages",
         "Increase page until page * page_size >= total. Introspection's handlers dimension pages the same "
         "way, with limit as the page size."),
    ],
    "audit": [
        ("What is written",
         "Every dispatch, allowed or refused, appends one entry to its organization's ledger before the "
         "answer is sent: time, user, credential, door, tool, coordinate, outcome, error code and a SHA-256 "
         "digest of the arguments (never the arguments themselves)."),
        ("The chain",
         "Each organization has one chain: hash = sha256(previous hash ‖ canonical JSON of the entry). "
         "Changing, removing or reordering any entry breaks every hash after it."),
        ("Verifying",
         "`prism audit verify --tenant SUB [--org ORG]` recomputes the chains and exits 1 naming the first "
         "broken entry."),
    ],
}


def _sections(sections: list[Section]) -> list[dict[str, str]]:
    return [{"heading": h, "text": t} for h, t in sections]


def topic_index() -> list[dict[str, str]]:
    return [{"topic": name, "title": title, "summary": summary} for name, (title, summary) in TOPICS.items()]


def guide(topic: str | None, view: TreeView, auth: AuthContext, recipe: Recipe) -> dict[str, Any]:
    if topic is None or not topic.strip():
        megas = [m for m in view.tree if m in MEGA_TOOLS]
        return {"dimension": "guide", "topic": None, "title": "Prism developer guide",
                "sections": _sections(OVERVIEW),
                "you": {"handlers": len(view.handlers), "mega_tools": megas, "scopes": sorted(auth.scopes),
                        "role": auth.role, "organization": auth.organization_name},
                "topics": topic_index(),
                "next": "dimension=guide&topic=quickstart"}
    name = topic.strip().lower()
    if name not in TOPICS:
        raise NotFound(f"topic: no guide topic {topic!r}; available: {', '.join(TOPICS)}", code="topic_not_found",
                       details={"field": "topic", "topics": list(TOPICS)})
    title, summary = TOPICS[name]
    body: dict[str, Any] = {"dimension": "guide", "topic": name, "title": title, "summary": summary}
    if name == "quickstart":
        body["steps"] = quickstart(view, auth, recipe)
    else:
        body["sections"] = _sections(TEXT[name])
    body["topics"] = [t["topic"] for t in topic_index()]
    return body


def _sh(body: Any) -> str:
    """A JSON body quoted for a POSIX shell."""
    return "'" + json.dumps(body, separators=(",", ":")).replace("'", "'\\''") + "'"


def _pick_list(view: TreeView) -> Handler | None:
    """The first list operation of a business app: the most telling first call."""
    lists = [h for h in view.handlers if h.coordinate.operation == "list"]
    for h in lists:
        if h.coordinate.mega_tool == "entity_crud" and h.coordinate.app != "core":
            return h
    return lists[0] if lists else (view.handlers[0] if view.handlers else None)


def quickstart(view: TreeView, auth: AuthContext, recipe: Recipe) -> list[dict[str, Any]]:
    auth_header = '-H "Authorization: Bearer $PRISM_KEY"'
    steps: list[dict[str, Any]] = [
        {"step": 1, "title": "Point your shell at Prism",
         "text": f"PRISM_URL is the host you reached this endpoint on (your workspace is "
                 f"{auth.tenant_subdomain!r}); PRISM_KEY is your key.",
         "command": 'export PRISM_URL="https://<your workspace host>" PRISM_KEY="<your key>"'},
        {"step": 2, "title": "Check the service is up (no key needed)",
         "command": 'curl -s "$PRISM_URL/api/v1/dev/ping/"'},
        {"step": 3, "title": "See who the key is",
         "text": f"This key acts as {auth.user_email} ({auth.role}) in {auth.organization_name!r} with scopes "
                 f"{' '.join(sorted(auth.scopes)) or 'none'}.",
         "command": f'curl -s "$PRISM_URL/api/v1/dev/me/" {auth_header}'},
        {"step": 4, "title": "Discover what you may call",
         "text": f"You may call {len(view.handlers)} handlers in {len(view.tree)} mega-tools.",
         "command": f'curl -s "$PRISM_URL/api/v1/dev/introspect/?dimension=mega_tools" {auth_header}',
         "also": f'curl -s "$PRISM_URL/api/v1/dev/introspect/?dimension=capability_search&query=low+stock" '
                 f'{auth_header}'},
    ]
    target = _pick_list(view)
    if target is None:
        steps.append({"step": 5, "title": "Call a handler",
                      "text": "This key may call no handler yet: it needs at least one of the scopes "
                              f"{', '.join(SCOPE_OF_CLASS.values())} and a role that grants permissions."})
        return steps
    r = recipe(target)
    steps.append({
        "step": 5, "title": f"Call {target.path}",
        "text": f"{target.description} Through the canonical door the answer is the envelope "
                "{success, data, tool_name}; list operations put {items, page, page_size, total} in data.",
        "command": f'curl -s -X POST "$PRISM_URL{r["http"]["path"]}" {auth_header} '
                   f'-H "Content-Type: application/json" -d {_sh(r["http"]["body"])}',
        "also": f'curl -s -X POST "$PRISM_URL{r["prism_path"]}" {auth_header} '
                f'-H "Content-Type: application/json" -d {_sh(r["http"]["body"]["arguments"])}',
    })
    steps.append({"step": 6, "title": "Before calling anything else, read its schema",
                  "command": f'curl -s "$PRISM_URL/api/v1/dev/introspect/?dimension=schema'
                             f'&mega_tool={target.coordinate.mega_tool}&app={target.coordinate.app}'
                             f'&entity={target.coordinate.entity}&operation={target.coordinate.operation}" '
                             f'{auth_header}'})
    return steps
