"""What Prism's code imports is installed by `pip install prism` (no extras): a module that only a dev or
optional dependency happens to bring along works in the test environment and breaks `bin/prism serve`."""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine_independent

SOURCE = Path(__file__).resolve().parent.parent / "src" / "prism"
# Modules that import an optional extra's packages, and the extras that provide them.
OPTIONAL = {"registry/semantic.py": ("semantic",), "ratelimit/redis_backend.py": ("redis",),
            "mcp_server/relay_redis.py": ("redis",), "mcp_server/relay_redis_listener.py": ("redis",),
            "cli/preflight.py": ("redis", "otel"),
            "observability/tracing.py": ("otel",), "integrations/mcp_upstream.py": ("federation",),
            "integrations/failures.py": ("federation",)}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[;<>=!~]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(roots: set[str]) -> set[str]:
    """The distributions `roots` install, with everything they require (markers that apply, no extras)."""
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in metadata.requires(name) or []:
            if ";" in requirement:
                marker = requirement.split(";", 1)[1]
                if "extra" in marker or not _marker_applies(marker):
                    continue
            pending.append(_name(requirement))
    return seen


def _marker_applies(marker: str) -> bool:
    from packaging.markers import Marker

    return Marker(marker).evaluate()


def _declared(extra: str | None) -> set[str]:
    names = set()
    for requirement in metadata.requires("prism") or []:
        in_extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        if (in_extra.group(1) if in_extra else None) == extra:
            names.add(_name(requirement))
    return names


def _top_level_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"prism", "__future__"}


def test_every_module_prism_imports_comes_with_its_runtime_dependencies() -> None:
    providers = metadata.packages_distributions()
    runtime = _closure(_declared(None))
    missing = []
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE).as_posix()
        allowed = set(runtime)
        for extra in OPTIONAL.get(relative, ()):
            allowed |= _closure(_declared(extra))
        for module in sorted(_top_level_imports(path)):
            distributions = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            if not distributions & allowed:
                missing.append(f"{relative}: {module} (from {sorted(distributions) or 'nowhere'})")
    assert missing == []
