"""A client generated from the tenant descriptor by a standard generator (openapi-python-client) calls
handlers of a running Prism.

The generated package runs in its own interpreter, as a user's project would; the generator is pinned in
clients/generator-requirements.txt.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import httpx

from tests.factories import Factory
from tests.live_prism import LiveServer, live_prism_fixture, run_process  # noqa: F401 -- the fixture

USE_GENERATED = """
import json, sys
from prism_tools import AuthenticatedClient
from prism_tools.api.entity_crud import (
    entity_crud_spare_parts_spare_part_create as create, entity_crud_spare_parts_spare_part_list as list_parts)
from prism_tools.models import EntityCrudSparePartsSparePartCreateBody, EntityCrudSparePartsSparePartListBody

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2], raise_on_unexpected_status=True)
made = create.sync(client=client, body=EntityCrudSparePartsSparePartCreateBody(sku="GEN-1", name="Seal", quantity=4))
page = list_parts.sync(client=client, body=EntityCrudSparePartsSparePartListBody(search="GEN-1"))
refused = create.sync(client=client, body=EntityCrudSparePartsSparePartCreateBody(sku="GEN-1", name="Seal"))
print(json.dumps({"made": made.to_dict(), "page": page.to_dict(), "refused": refused.to_dict()}))
"""


async def test_a_generated_python_client_calls_handlers(live_prism: LiveServer, factory: Factory,
                                                        tmp_path: Path) -> None:
    generator = shutil.which("openapi-python-client")
    assert generator, "pip install --no-deps -r clients/generator-requirements.txt"
    ws = await factory.workspace()
    key = ws.keys["owner"]
    descriptor = await asyncio.to_thread(httpx.get, f"{live_prism.base_url}/.well-known/openapi.json", timeout=30,
                           headers={"Authorization": f"Bearer {key}"})
    (tmp_path / "tenant.json").write_text(descriptor.text)
    (tmp_path / "config.yaml").write_text("post_hooks: []\nproject_name_override: prism_tools\n"
                                          "package_name_override: prism_tools\n")
    generated = await run_process(
        [generator, "generate", "--path", "tenant.json", "--output-path", "prism_tools", "--config", "config.yaml",
         "--meta", "none"], cwd=tmp_path)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    (tmp_path / "use_generated.py").write_text(USE_GENERATED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = await run_process([sys.executable, "use_generated.py", live_prism.base_url, key], cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout)
    assert result["made"]["success"] is True and result["made"]["data"]["sku"] == "GEN-1"
    assert [item["id"] for item in result["page"]["data"]["items"]] == [result["made"]["data"]["id"]]
    # A refusal parses as the documented error envelope (the sku is unique per organization).
    assert result["refused"]["success"] is False and result["refused"]["error"] == "conflict"
