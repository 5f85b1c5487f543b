"""`prism serve`'s banner names the address it listens on: the port the system chose for `--port 0`, and an IPv6
address in brackets, so that its URL and its `curl` line work as printed."""

from __future__ import annotations

import shlex
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from prism.cli.serve import _banner
from tests.processes import ServerPool, clean_env, scratch_database

pytestmark = pytest.mark.engine_independent  # the demo's own SQLite file, as the quickstart has it


def test_an_ipv6_address_is_bracketed_in_the_url() -> None:
    assert _banner(None, "::1", 8000)[0]["url"] == "http://[::1]:8000"
    assert _banner(None, "fe80::1%eth0", 8000)[0]["url"] == "http://[fe80::1%25eth0]:8000"
    assert _banner(None, "0.0.0.0", 8000)[0]["url"] == "http://127.0.0.1:8000"  # noqa: S104
    assert _banner(None, "192.0.2.7", 8000)[0]["url"] == "http://192.0.2.7:8000"


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_banner_of_port_0_works_as_printed(tmp_path: Path, server_pool: ServerPool, host: str) -> None:
    if host == "::1" and not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    with scratch_database(tmp_path, "banner") as url:
        # The pool's own --host and --port come first on the command line: these, the last ones, are used.
        server = server_pool.start("--host", host, "--port", "0", "--seed-demo", "--json", ready=False,
                                   env=clean_env(PRISM_DATABASE_URL=url), cwd=tmp_path)
        banner = server.banner_json(timeout=120)
        shown = f"[{host}]" if ":" in host else host
        assert banner["url"].startswith(f"http://{shown}:") and not banner["url"].endswith(":0"), banner
        assert httpx.get(f"{banner['url']}/api/v1/dev/ping/", timeout=10).status_code == 200
        # The curl line as printed reaches the server with the demo key.
        done = subprocess.run(shlex.split(banner["curl"]), capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0 and '"success":true' in done.stdout.replace(" ", ""), done
