"""`prism audit verify --since FILE` / `--checkpoint FILE` with a file it cannot use is a bad argument (exit 2,
`invalid_arguments` or `organization_not_found`, a message naming the option and the problem), never a broken
log (exit 1, a report with `valid: false`): docs/audit.md "Verifying".

A --since file whose signature did not verify, or whose frontier did not make its root, was reported as the log
being BROKEN; one of another tenant's or organization's log as "names no organization" with exit 1, which a
script could not tell from a tampered log either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.ledger_support import sealed_log
from tests.processes import TRACEBACK, CliResult, run_cli

USAGE_EXIT = 2


def verify(database_url: str, ws: Workspace, *args: str, as_json: bool = True) -> CliResult:
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, *args, *(("--json",) if as_json else ()),
                     database_url=database_url)
    assert TRACEBACK not in result.stderr, str(result)
    return result


def exported(database_url: str, ws: Workspace, path: Path, **changed: Any) -> Path:
    """`prism audit checkpoint` of the workspace's log, written to `path` with some fields changed."""
    result = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug,
                     database_url=database_url)
    assert result.returncode == 0, str(result)
    path.write_text(json.dumps({**json.loads(result.stdout), **changed}))
    return path


def refused(result: CliResult, code: str, *named: str) -> str:
    """The one JSON error line of a bad argument: exit 2, nothing on stdout (no report of a log)."""
    assert result.returncode == USAGE_EXIT, str(result)
    error = result.error
    assert error["error"] == code and all(text in error["message"] for text in named), str(result)
    return str(error["message"])


async def test_a_since_file_that_cannot_be_used_is_a_bad_argument_not_a_broken_log(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    ws = await sealed_log(client, factory, db)
    good = exported(database_url, ws, tmp_path / "good.json")
    assert verify(database_url, ws, "--since", str(good)).returncode == 0
    signed = json.loads(good.read_text())
    (tmp_path / "not.json").write_text("{not json")
    files = {  # the file, and what the message names
        "not JSON": (tmp_path / "not.json", "not a readable JSON checkpoint"),
        "no frontier": (exported(database_url, ws, tmp_path / "bare.json", frontier=None), "no frontier"),
        "a size of another type": (exported(database_url, ws, tmp_path / "size.json", tree_size="4"),
                                   "'tree_size'"),
        "a root the key did not sign": (exported(database_url, ws, tmp_path / "root.json", root="ab" * 32),
                                        "not signed by this deployment's key"),
        "a frontier that does not make the root": (
            exported(database_url, ws, tmp_path / "frontier.json", frontier=["cd" * 32] * len(signed["frontier"])),
            "frontier does not make its root"),
        "a frontier of another length": (exported(database_url, ws, tmp_path / "short.json", frontier=[]),
                                         "frontier is not valid"),
    }
    for path, named in files.values():
        refused(verify(database_url, ws, "--since", str(path)), "invalid_arguments", "--since", str(path), named)
    for case in ("not JSON", "a root the key did not sign"):  # the text output: one error line, no report
        path, named = files[case]
        text = verify(database_url, ws, "--since", str(path), as_json=False)
        assert text.returncode == USAGE_EXIT and text.stdout == "", (case, str(text))
        assert text.stderr.startswith("error: --since") and named in text.stderr, (case, str(text))
        assert text.stderr.rstrip().endswith("(invalid_arguments)"), (case, str(text))


async def test_a_checkpoint_file_of_another_tenant_or_organization_is_a_bad_argument(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    ws, other = await sealed_log(client, factory, db), await sealed_log(client, factory, db)
    theirs = exported(database_url, other, tmp_path / "theirs.json")
    origin = json.loads(theirs.read_text())["origin"]
    for option in ("--since", "--checkpoint"):  # another tenant's log
        refused(verify(database_url, ws, option, str(theirs)), "organization_not_found", option, origin)
    ours = exported(database_url, ws, tmp_path / "ours.json")
    second = await factory.second_org(ws)
    for option in ("--since", "--checkpoint"):  # a log of the tenant, but not the one --org names
        refused(verify(database_url, ws, "--org", second.slug, option, str(ours)), "organization_not_found", option)
    refused(verify(database_url, ws, "--since", str(ours), "--checkpoint", str(theirs)), "invalid_arguments",
            "--since", "--checkpoint")
    # Signed, but not as Prism writes it: the signature covers the root's bytes, the log's check its text.
    upper = exported(database_url, ws, tmp_path / "upper.json", root=json.loads(ours.read_text())["root"].upper())
    for option in ("--checkpoint", "--since"):
        refused(verify(database_url, ws, "--org", ws.org.slug, option, str(upper)), "invalid_arguments", option,
                "root is not 64 lowercase hex digits")
    forged = exported(database_url, ws, tmp_path / "forged.json", root="ab" * 32)
    refused(verify(database_url, ws, "--checkpoint", str(forged)), "invalid_arguments", "--checkpoint",
            "not signed by this deployment's key")
    both = verify(database_url, ws, "--since", str(ours), "--checkpoint", str(ours))  # the files fit: verified
    assert both.returncode == 0 and both.json["valid"] is True, str(both)
