"""JSON Schema (draft 2020-12, as Pydantic writes it) → OpenAPI 3.0.3 Schema Objects.

OpenAPI 3.0.3 speaks an older dialect: one `type` (nullability is `nullable: true`), no `const`, numeric
`exclusiveMinimum`/`exclusiveMaximum` are booleans beside `minimum`/`maximum`, `$ref` siblings are ignored,
and shared definitions live in `components/schemas` rather than `$defs`. Keywords 3.0.3 does not know
are dropped rather than passed on, because validators and generators reject them.
"""

from __future__ import annotations

from typing import Any

from prism.registry.schema_reading import mapping_of

# Schema Object keywords of OpenAPI 3.0.3 (plus the ones converted below); anything else is dropped.
_KEPT = frozenset({
    "title", "multipleOf", "maximum", "minimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxProperties", "minProperties", "required", "enum", "type", "allOf", "oneOf", "anyOf", "not",
    "items", "properties", "additionalProperties", "description", "format", "default", "nullable", "readOnly",
    "writeOnly", "example", "deprecated", "discriminator",
})
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")
_LISTS = frozenset({"required", "enum"})


class Components:
    """Collects converted `$defs` under unique component names (two handlers may both define `Item`)."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}

    def add(self, name: str, schema: dict[str, Any]) -> str:
        base = "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "Schema"
        candidate, n = base, 1
        while candidate in self.schemas and self.schemas[candidate] != schema:
            n += 1
            candidate = f"{base}_{n}"
        self.schemas[candidate] = schema
        return candidate


def to_openapi30(schema: dict[str, Any], components: Components) -> dict[str, Any]:
    """One handler's parameter schema as a 3.0.3 Schema Object; its `$defs` go into `components`."""
    renamed: dict[str, str] = {}
    defs = mapping_of(schema, "$defs")
    for name in defs:  # names first, so definitions may refer to each other in any order
        renamed[name] = name
    for name, definition in defs.items():
        converted = _convert(definition, renamed)
        renamed[name] = components.add(name, converted)
    # A second pass when a name had to change: refs converted before the rename point at the final names.
    if any(renamed[n] != n for n in defs):
        for name, definition in defs.items():
            components.schemas[renamed[name]] = _convert(definition, renamed)
    top: dict[str, Any] = _convert({k: v for k, v in schema.items() if k != "$defs"}, renamed)
    return top


def _ref(ref: Any, renamed: dict[str, str]) -> dict[str, Any]:
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
    if name not in renamed:  # a reference to nothing among the handler's definitions: any value
        return {}
    return {"$ref": f"#/components/schemas/{renamed[name]}"}


def _convert(schema: Any, renamed: dict[str, str]) -> dict[str, Any]:
    # 3.0.3 has no boolean schemas: `true` (anything) is the empty schema, `false` (nothing) its negation. A
    # sub-schema that is neither an object nor a boolean is invalid, and read as anything.
    if schema is False:
        return {"not": {}}
    if not isinstance(schema, dict):
        return {}
    if "$ref" in schema:
        ref = _ref(schema["$ref"], renamed)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        # 3.0.3 ignores a $ref's siblings: keep them by wrapping the reference in allOf.
        return {"allOf": [ref], **_convert(rest, renamed)} if rest.keys() - {"title"} else ref
    out: dict[str, Any] = {}
    nullable = False
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            nullable = nullable or "null" in value
            if len(kinds) == 1:
                out["type"] = kinds[0]
            elif kinds:
                out.setdefault("anyOf", []).extend({"type": t} for t in kinds)
        elif key == "type" and value == "null":
            nullable = True
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "examples" and isinstance(value, list) and value:
            out.setdefault("example", value[0])
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            options = [o for o in value if not (isinstance(o, dict) and o.get("type") == "null" and len(o) == 1)]
            nullable = nullable or len(options) < len(value)
            converted = [_convert(o, renamed) for o in options]
            if len(converted) == 1:
                only = converted[0]
                if "$ref" in only:
                    out.setdefault("allOf", []).append(only)
                else:
                    out.update({k: v for k, v in only.items() if k not in out})
            elif converted:
                out[key] = converted
        elif key == "allOf" and isinstance(value, list):
            out.setdefault("allOf", []).extend(_convert(o, renamed) for o in value)
        elif key == "items":
            out["items"] = _convert(value, renamed)
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: _convert(sub, renamed) for name, sub in value.items()}
        elif key == "additionalProperties":
            out[key] = _convert(value, renamed) if isinstance(value, dict) else bool(value)
        elif key == "not":
            out["not"] = _convert(value, renamed)
        elif key == "discriminator" and isinstance(value, dict):
            targets = {k: _ref(v, renamed).get("$ref") for k, v in mapping_of(value, "mapping").items()}
            mapping = {k: target for k, target in targets.items() if target}
            out[key] = {**value, **({"mapping": mapping} if mapping else {})}
        elif key in _LISTS and not isinstance(value, list):
            continue  # an invalid schema's `required` or `enum`: dropped rather than passed on
        elif key in _KEPT:
            out[key] = value
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {}  # 3.0.3 requires items on an array
    if nullable:
        if "type" not in out and not any(k in out for k in ("allOf", "anyOf", "oneOf", "enum")):
            out["enum"] = [None]  # a schema that only admits null
        out["nullable"] = True
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if out.get("type") not in (None, *_JSON_TYPES):
        out.pop("type")
    return out
