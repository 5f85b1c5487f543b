"""What pyproject.toml declares is what Prism uses, and the lock files pin all of it.

Ranges live in pyproject.toml; the exact versions bin/ and CI install live in requirements.lock (runtime) and
requirements-dev.lock (runtime, dev and every extra), regenerated with `bin/lock`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

pytestmark = pytest.mark.engine_independent

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "prism"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

# Dependencies no module of Prism imports by name, each needed all the same: (why, a file of Prism and the text
# in it that proves the need, so the entry goes when the need does).
NOT_IMPORTED = {
    "asyncpg": ("SQLAlchemy's postgresql+asyncpg driver, chosen by the database URL", "storage/engines.py",
                "postgresql+asyncpg"),
    "uvloop": ("Uvicorn's event loop, named to Uvicorn", "cli/serve.py", 'loop="uvloop"'),
    "httptools": ("Uvicorn's HTTP parser, named to Uvicorn", "cli/serve.py", 'http="httptools"'),
    "wordllama": ("its packaged weights and tokenizer files are read, the package never imported",
                  "registry/semantic.py", '"wordllama"'),
}


def requirements(extra: str | None) -> list[Requirement]:
    listed = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    return [Requirement(r) for r in listed]


def imported_modules() -> set[str]:
    """Top-level modules any file of src/prism imports, at module level or inside a function."""
    found: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def modules_of(distribution: str) -> set[str]:
    """The top-level modules an installed distribution provides."""
    providers = metadata.packages_distributions()
    return {module for module, dists in providers.items()
            if canonicalize_name(distribution) in {canonicalize_name(d) for d in dists}}


def locked(lock: str) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / lock).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)(\s*;.*)?", line)  # a marker may follow
        assert match, f"{lock}: {line!r} is not an exact pin"
        pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return pins


@pytest.mark.parametrize("extra", [None, "redis", "semantic", "otel"], ids=["runtime", "redis", "semantic", "otel"])
def test_every_dependency_is_imported_or_its_need_is_written_down(extra: str | None) -> None:
    imported = imported_modules()
    unused = []
    for requirement in requirements(extra):
        name = canonicalize_name(requirement.name)
        if name in NOT_IMPORTED:
            _why, path, evidence = NOT_IMPORTED[name]
            assert evidence in (SOURCE / path).read_text(encoding="utf-8"), f"{name}: {path} no longer needs it"
            continue
        if not modules_of(name) & imported:
            unused.append(name)
    assert unused == [], f"declared but never imported by src/prism: {unused}"


def test_runtime_dependencies_are_ranges_not_pins() -> None:
    for extra in (None, *PROJECT["optional-dependencies"]):
        for requirement in requirements(extra):
            if canonicalize_name(requirement.name) == "prism":
                continue
            operators = {spec.operator for spec in requirement.specifier}
            assert "==" not in operators, f"{requirement}: pin it in the lock files, give a range here"
            assert operators & {">=", "~="}, f"{requirement}: give the oldest version Prism works with"


@pytest.mark.parametrize(("lock", "extras"), [("requirements.lock", []),
                                               ("requirements-dev.lock", ["dev", "redis", "semantic", "otel"])])
def test_the_lock_pins_every_dependency_within_its_range(lock: str, extras: list[str]) -> None:
    pins = locked(lock)
    assert "prism" not in pins  # Prism itself is installed on top, with --no-deps
    for extra in (None, *extras):
        for requirement in requirements(extra):
            name = canonicalize_name(requirement.name)
            if name == "prism" or not (requirement.marker is None or requirement.marker.evaluate()):
                continue
            assert name in pins, f"{lock} does not pin {name}"
            assert requirement.specifier.contains(pins[name], prereleases=True), \
                f"{lock} pins {name}=={pins[name]}, outside {requirement.specifier}"


def test_python_multipart_is_gone_with_nothing_needing_it() -> None:
    """Starlette needs it only for request.form(); Prism reads its forms itself (prism/web/browser.py)."""
    assert "python-multipart" not in locked("requirements.lock")
    assert not any(".form()" in p.read_text(encoding="utf-8") for p in SOURCE.rglob("*.py"))


def test_the_server_imports_no_redis_client_unless_redis_is_configured() -> None:
    script = ("import sys\nfrom prism.app import create_app\nfrom prism.config import Settings\n"
              "create_app(Settings(database_url='sqlite:///unused.db'))\nprint('redis' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
