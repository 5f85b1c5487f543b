"""An OpenAPI description imported for the deployment with the CLI, as a running server comes to see it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from prism.config import Settings
from tests.factories import Workspace
from tests.governance_support import ok
from tests.processes import cli_json


async def imported_for_the_deployment(client: httpx.AsyncClient, ws: Workspace, settings: Settings, spec: Path,
                                      name: str) -> list[dict[str, Any]]:
    """`spec` imported as `name` with `prism integration import-openapi`, once the server lists it to `ws` (it
    notices another process's import within PRISM_INTEGRATIONS_REFRESH_SECONDS, 2 s): the integrations listed."""
    await asyncio.to_thread(cli_json, "integration", "import-openapi", str(spec), "--app", name,
                            database_url=settings.database_url)
    for _ in range(100):
        offered = await ok(client, ws, "config_manage/integrations/integration/list", {})
        if name in [i["name"] for i in offered["items"]]:
            return list(offered["items"])
        await asyncio.sleep(0.1)
    raise AssertionError("the import never reached the server")
