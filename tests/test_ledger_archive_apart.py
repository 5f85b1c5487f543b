"""An archive reads and verifies the log, and writes its file, in a read transaction; only its prune writes. So
other writers of the deployment (every governed call, on SQLite) never wait for a log to verify; a prune finding
another archive pruned meanwhile refuses; and a file a stopped run left under the archive's name is taken as the
archive only if it is exactly that archive (docs/audit.md "Archive and retention")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from prism.ledger import archive as archive_module
from prism.ledger.archive import ArchiveRefused, archive
from prism.storage import Database
from tests.factories import Workspace, ledger_keys
from tests.test_ledger import N
from tests.test_ledger_archive import files_in, lines_of, saved_lines, stored
from tests.test_ledger_proofs import ws_fixture  # noqa: F401  (the workspace with its 21-entry log)


def _while_verifying(monkeypatch: pytest.MonkeyPatch, meanwhile: Any) -> None:
    """Run `meanwhile()` as the archive's verification starts, as another process would."""
    real = archive_module.verify_log

    async def verifying(*args: Any, **kwargs: Any) -> Any:
        await meanwhile()
        return await real(*args, **kwargs)

    monkeypatch.setattr(archive_module, "verify_log", verifying)


async def test_other_writers_commit_while_an_archive_verifies_the_log(
        db: Database, ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    committed: list[bool] = []

    async def another_writer() -> None:
        async with asyncio.timeout(3):  # SQLite's busy wait is 10 s: a held write lock would show as a timeout
            async with db.write() as session:
                await session.execute(text("UPDATE organizations SET name = name WHERE id = :id"), {"id": ws.org.id})
        committed.append(True)

    _while_verifying(monkeypatch, another_writer)
    result = await archive(db, ws.org.id, ledger_keys(), through=N + 14, out=tmp_path / "a.jsonl", prune=True)
    assert committed == [True] and result.pruned
    assert (await stored(db, ws.org.id))[0] == N + 14


async def test_a_prune_finding_another_archive_pruned_meanwhile_refuses(
        db: Database, ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = ledger_keys()
    raced: list[Any] = []

    async def another_archive() -> None:
        if not raced:  # the nested archive verifies too
            raced.append(None)
            raced[0] = await archive(db, ws.org.id, keys, through=5, out=tmp_path / "other.jsonl", prune=True)

    _while_verifying(monkeypatch, another_archive)
    with pytest.raises(ArchiveRefused) as refused:
        await archive(db, ws.org.id, keys, through=10, out=tmp_path / "late.jsonl", prune=True)
    assert refused.value.code == "archive_raced", refused.value
    assert (await stored(db, ws.org.id))[0] == 5  # the other archive's prune, and nothing more


async def test_a_file_a_stopped_run_left_is_taken_as_the_archive_when_it_is_exactly_that_archive(
        db: Database, ws: Workspace, tmp_path: Path) -> None:
    keys, out = ledger_keys(), tmp_path / "a.jsonl"
    # As a run stopped after its file took its name and before its prune committed leaves it.
    await archive(db, ws.org.id, keys, through=N, out=out, prune=False)
    left = out.read_bytes()
    result = await archive(db, ws.org.id, keys, through=N, out=out, prune=True)
    assert result.pruned and out.read_bytes() == left
    assert result.checkpoint.as_dict() == lines_of(out)[0]["checkpoint"]
    assert (await stored(db, ws.org.id))[0] == N
    assert files_in(tmp_path) == ["a.jsonl"]


@pytest.mark.parametrize("change", ["an entry", "the range", "the signature", "not an archive"])
async def test_a_file_under_the_name_that_is_not_exactly_the_archive_is_never_overwritten_nor_pruned_behind(
        db: Database, ws: Workspace, tmp_path: Path, change: str) -> None:
    keys, out = ledger_keys(), tmp_path / "a.jsonl"
    await archive(db, ws.org.id, keys, through=N, out=out, prune=False)
    lines = lines_of(out)
    if change == "an entry":
        lines[2]["content"]["outcome"] = "allowed" if lines[2]["content"]["outcome"] == "refused" else "refused"
    elif change == "the range":
        lines[0]["last_seq"] = N + 1
    elif change == "the signature":
        lines[0]["checkpoint"]["signature"] = lines[0]["checkpoint"]["signature"][::-1]
    else:
        lines = [{"note": "a file of someone else's"}]
    before = saved_lines(out, lines).read_bytes()
    with pytest.raises(ArchiveRefused) as refused:
        await archive(db, ws.org.id, keys, through=N, out=out, prune=True)
    assert refused.value.code == "archive_exists", refused.value
    assert out.read_bytes() == before and (await stored(db, ws.org.id))[0] == 0
