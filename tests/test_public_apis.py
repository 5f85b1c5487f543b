"""Prism uses other libraries through their public APIs only (docs/architecture.md "Storage", "One pipeline").

ruff's SLF001 (in `bin/test`'s ruff run) catches a private attribute reached through an object; these catch
what it does not: importing a private module or name of another package, and subclassing a class of another
package to override its private methods.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "prism"
FILES = sorted(SRC.rglob("*.py"))
# Alembic's scripts run only inside a migration (`alembic.context` exists there alone).
MODULES = [p for p in FILES if "migrations" not in p.parts]


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _imports_of_others(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and not node.module.startswith("prism"):
            found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if not alias.name.startswith("prism")]
    return found


@pytest.mark.engine_independent
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_module_or_name_of_another_library_is_imported(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    private = [name for name in _imports_of_others(tree) if _private(name) and name != "__future__.annotations"]
    assert private == [], f"{path}: imports private names of other libraries: {private}"


@pytest.mark.engine_independent
@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_class_overrides_a_private_method_of_another_librarys_class(path: Path) -> None:
    module = importlib.import_module(".".join(("prism", *path.relative_to(SRC).with_suffix("").parts))
                                     .removesuffix(".__init__"))
    for cls in vars(module).values():
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        foreign = [base for base in cls.__mro__[1:] if not base.__module__.startswith(("prism", "builtins"))]
        overridden = [name for name, value in vars(cls).items() if _private(name)
                      and isinstance(value, types.FunctionType | classmethod | staticmethod)
                      and any(name in vars(base) for base in foreign)]
        assert overridden == [], f"{cls.__qualname__} overrides private names of {foreign}: {overridden}"
