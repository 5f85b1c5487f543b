"""What a server's start-up imports: libraries needed only by the first outbound request wait for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.engine_independent


def test_building_the_app_does_not_import_the_outbound_http_client() -> None:
    probe = ("import sys; import prism.app, prism.webhooks.tasks, prism.apps.integrations.handlers; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'yarl', 'multidict')))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"
