"""Stable handler names for imported operations: entity from the tag (or the path's first resource),
operation from the operationId (or the method and path), both normalised to the registry's patterns."""

from __future__ import annotations

import re

from prism.registry.mega_tools import NAME_PATTERN, OPERATION_PATTERN

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")
_METHOD_VERBS = {"get": "get", "head": "head", "post": "create", "put": "replace", "patch": "update",
                 "delete": "delete", "options": "options", "trace": "trace"}


def words(text: str) -> list[str]:
    """`repos/get-content` → ["repos", "get", "content"]; `listPetsByID` → ["list", "pets", "by", "id"]."""
    return [w.lower() for w in _WORDS.findall(re.sub(r"[^A-Za-z0-9]+", " ", text))]


# Path segments that say which version or which door of an API a path is under, not what it is about: `/v1/charges`,
# `/rest/api/2/issue/{key}` and `/api/v3/users` are about charges, issues and users. Taken as the resource, they put
# every operation of a description without tags under one entity (Stripe's 451 under `v1`, Jira's 320 under `api`):
# the tree's entity level then says nothing, and capability search cannot tell one resource from another.
# v1, v2beta1, 2, 1.0 (not 3ds), and dated versions: 2024-01, 2023-10-16.
_VERSION = re.compile(r"v?\d+([._]\d+)*((alpha|beta|rc)\d*)?|\d{4}-\d{2}(-\d{2})?", re.IGNORECASE)
_API_PREFIXES = frozenset({"api", "apis", "rest"})


def path_resource(path: str) -> str:
    """The resource a path is about, for an operation without a tag: its first segment that is neither a parameter
    nor a version or API prefix (`/v1/charges/{id}` → `charges`); the first one that is not a parameter when all are
    such prefixes (`/api`)."""
    segments = [s for s in path.strip("/").split("/") if s and not s.startswith("{")]
    for segment in segments:
        if not _VERSION.fullmatch(segment) and segment.lower() not in _API_PREFIXES:
            return segment
    return segments[0] if segments else "resource"


def entity_name(text: str) -> str:
    name = "_".join(words(text))[:40].strip("_") or "resource"
    if not name[0].isalpha():
        name = ("r_" + name)[:40]
    assert NAME_PATTERN.match(name), name
    return name


def app_name_problem(name: str) -> str | None:
    if not NAME_PATTERN.match(name):
        return f"app name {name!r} must be 1-40 lower-case letters, digits and _, starting with a letter"
    return None


def operation_name(operation_id: str | None, method: str, path: str, entity_words: list[str]) -> str:
    """lowerCamelCase of the operationId without its leading entity words (`repos/get-content` in `repos` →
    `getContent`); without an operationId, the method's verb and the path (`getPetsByPetId`)."""
    if operation_id:
        parts = words(operation_id)
        while len(parts) > 1 and entity_words and parts[:len(entity_words)] == entity_words:
            parts = parts[len(entity_words):]
    else:
        parts = [_METHOD_VERBS.get(method, method)]
        for segment in path.strip("/").split("/"):
            if segment.startswith("{") and segment.endswith("}"):
                parts += ["by", *words(segment)]
            else:
                parts += words(segment)
    if not parts:
        parts = [_METHOD_VERBS.get(method, method)]
    name = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    if not name[0].isalpha():
        name = "op" + name[:1].upper() + name[1:]
    name = name[:64]
    assert OPERATION_PATTERN.match(name), name
    return name
