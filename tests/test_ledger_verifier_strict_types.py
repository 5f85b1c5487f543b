"""`examples/ledger_verifier.py` takes each field it reads only with the type Prism writes (ledger_verifier.md).

It read JSON with Python's types: `"seq": true` was position 1 (a bool is an int in Python), so a proof or an
archive naming no position at all verified; a hash in upper case or with spaces was taken by `bytes.fromhex`;
a position past 2^64 ended in a traceback; NaN and an object with a key twice (which readers resolve
differently) were read as Python reads them. Each document below is rejected with one `FAILED:` line naming
the field, and exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.test_ledger_archive import archived, lines_of, saved_lines
from tests.test_ledger_proofs import accepted, document, rejected, write_entries

SIZE = 21


@pytest.fixture
async def ws(client: httpx.AsyncClient, factory: Factory) -> Workspace:
    workspace = await factory.workspace(roles=("owner",))
    await write_entries(factory.db, workspace, SIZE)
    return workspace


def saved(path: Path, value: Any) -> Path:
    """Written with the standard library, which writes integers of any size (orjson stops at 64 bits)."""
    path.write_text(json.dumps(value))
    return path


def _with_raw(value: dict[str, Any], raw_member: str) -> str:
    """The document as JSON text with `raw_member` (`"name": value`, as text) written first."""
    return "{" + raw_member + ", " + json.dumps(value)[1:]


def _upper(hex_text: str) -> str:
    """The same bytes in upper case (64 random hex digits without a letter: about one in 10^13)."""
    return hex_text.upper()


def _spaced(hex_text: str) -> str:
    return hex_text[:2] + " " + hex_text[2:]


async def test_a_proof_with_a_field_of_another_type_is_rejected(
        database_url: str, ws: Workspace, tmp_path: Path) -> None:
    proof = document(database_url, "prove", "--tenant", ws.tenant.subdomain, "--seq", "1")
    accepted("inclusion", saved(tmp_path / "proof.json", proof))
    entry, signed, path = proof["entry"], proof["checkpoint"], proof["audit_path"]
    forged: dict[str, tuple[dict[str, Any], str]] = {  # the document, and what the rejection names
        "seq true, which Python counts as 1": ({**proof, "entry": {**entry, "seq": True}}, "'seq'"),
        "seq 1.0": ({**proof, "entry": {**entry, "seq": 1.0}}, "'seq'"),
        "seq as text": ({**proof, "entry": {**entry, "seq": "1"}}, "'seq'"),
        "seq past 2^64 (a traceback)": ({**proof, "entry": {**entry, "seq": 2**64 + 1}}, "'seq'"),
        "the entry hash in upper case": ({**proof, "entry": {**entry, "entry_hash": entry["entry_hash"].upper()}},
                                         "entry_hash"),
        "the root in upper case": ({**proof, "checkpoint": {**signed, "root": _upper(signed["root"])}}, "'root'"),
        "the root with a space": ({**proof, "checkpoint": {**signed, "root": _spaced(signed["root"])}}, "'root'"),
        "the size 21.0": ({**proof, "checkpoint": {**signed, "tree_size": float(SIZE)}}, "'tree_size'"),
        "the size as text": ({**proof, "checkpoint": {**signed, "tree_size": str(SIZE)}}, "'tree_size'"),
        "an audit path element in upper case": ({**proof, "audit_path": [_upper(path[0]), *path[1:]]},
                                                "audit path"),
        "an audit path element with a space": ({**proof, "audit_path": [_spaced(path[0]), *path[1:]]},
                                               "audit path"),
        "the leaf as a number": ({**proof, "leaf": 1}, "'leaf'"),
        "the timestamp as a number": ({**proof, "checkpoint": {**signed, "timestamp": 0}}, "'timestamp'"),
    }
    for number, (case, (value, naming)) in enumerate(forged.items()):
        out = rejected("inclusion", saved(tmp_path / f"forged{number}.json", value))
        assert naming in out, (case, out)
    not_strict_json = {
        "a key twice (read as its last value)": _with_raw(proof, '"leaf": "' + "0" * 64 + '"'),
        "NaN": _with_raw(proof, '"note": NaN'),
        "Infinity": _with_raw(proof, '"note": -Infinity'),
    }
    for number, (case, raw) in enumerate(not_strict_json.items()):
        (tmp_path / f"raw{number}.json").write_text(raw)
        assert "not readable JSON" in rejected("inclusion", tmp_path / f"raw{number}.json"), case


async def test_a_checkpoint_or_consistency_proof_with_a_field_of_another_type_is_rejected(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    old = saved(tmp_path / "old.json", document(database_url, "checkpoint", "--tenant", ws.tenant.subdomain))
    signed = json.loads(old.read_text())
    for number, checkpoint in enumerate([{**signed, "root": _upper(signed["root"])},
                                         {**signed, "root": _spaced(signed["root"])}]):
        assert "'root'" in rejected("checkpoint", saved(tmp_path / f"cp{number}.json", checkpoint))
    await write_entries(db, ws, 3)
    proof = document(database_url, "consistency", "--tenant", ws.tenant.subdomain, "--from", str(old))
    new = saved(tmp_path / "new.json", proof["checkpoint"])
    accepted("consistency", old, new, saved(tmp_path / "proof.json", proof))
    for number, (name, value) in enumerate([("old_size", float(SIZE)), ("old_size", str(SIZE)),
                                            ("new_size", True)]):
        out = rejected("consistency", old, new, saved(tmp_path / f"forged{number}.json", {**proof, name: value}))
        assert f"'{name}'" in out, out
    upper_path = {**proof, "proof": [_upper(proof["proof"][0]), *proof["proof"][1:]]}
    assert "consistency proof" in rejected("consistency", old, new, saved(tmp_path / "upper.json", upper_path))


async def test_an_archive_with_a_field_of_another_type_is_rejected(
        database_url: str, ws: Workspace, tmp_path: Path) -> None:
    archived(database_url, ws, 12, tmp_path / "a.jsonl")
    accepted("archive", tmp_path / "a.jsonl")
    header, first, *rest = lines_of(tmp_path / "a.jsonl")
    signed = header["checkpoint"]
    forged: dict[str, tuple[list[dict[str, Any]], str]] = {
        "the first entry's seq true, which Python counts as 1": ([header, {**first, "seq": True}, *rest], "'seq'"),
        "the first entry's seq 1.0": ([header, {**first, "seq": 1.0}, *rest], "'seq'"),
        "first_seq true": ([{**header, "first_seq": True}, first, *rest], "'first_seq'"),
        "last_seq as text": ([{**header, "last_seq": "12"}, first, *rest], "'last_seq'"),
        "a start that is not null for an archive from entry 1": ([{**header, "start": {}}, first, *rest],
                                                                  "'start'"),
        "the checkpoint's root in upper case": (
            [{**header, "checkpoint": {**signed, "root": _upper(signed["root"])}}, first, *rest], "'root'"),
        "a prev_hash that is not text": ([header, {**first, "prev_hash": 0}, *rest], "prev_hash"),
        "the frontier in upper case": ([{**header, "frontier": [_upper(h) for h in header["frontier"]]}, first,
                                        *rest], "frontier"),
    }
    for number, (case, (lines, naming)) in enumerate(forged.items()):
        out = rejected("archive", saved_lines(tmp_path / f"forged{number}.jsonl", lines))
        assert naming in out, (case, out)


async def test_a_lone_surrogate_in_a_checkpoint_or_an_archive_is_rejected_not_a_traceback(
        database_url: str, ws: Workspace, tmp_path: Path) -> None:
    """Python's json reads an escaped lone surrogate; encoding it again raised UnicodeEncodeError out of the
    verifier."""
    signed = document(database_url, "checkpoint", "--tenant", ws.tenant.subdomain)
    raw = json.dumps(signed).replace('"timestamp": "', '"timestamp": "\\ud800', 1)
    (tmp_path / "cp.json").write_text(raw)
    assert "surrogate" in rejected("checkpoint", tmp_path / "cp.json")
    archived(database_url, ws, 12, tmp_path / "a.jsonl")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"door":"', '"door":"\\udc00', 1)
    (tmp_path / "forged.jsonl").write_text("\n".join(lines) + "\n")
    assert "surrogate" in rejected("archive", tmp_path / "forged.jsonl")
