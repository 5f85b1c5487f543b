"""Proofs of the audit ledger: `prism audit prove` and `prism audit consistency` (real processes on the test
database) print documents that `examples/ledger_verifier.py` (a process of its own, without Prism) accepts, and
that it rejects once an entry, a path or a checkpoint in them is changed."""

from __future__ import annotations

import importlib.util
import json
import random
import struct
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import update

from prism.kit.canonical import CANONICAL
from prism.kit.timeutil import iso, utcnow
from prism.ledger.checkpoints import sign_checkpoint
from prism.ledger.entries import EntryDraft, audit_entries, content_hash, content_of
from prism.ledger.merkle import verify_consistency, verify_inclusion
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import insert_waiting, seal_waiting
from tests.processes import TRACEBACK, CliResult, run_cli
from tests.test_ledger import N, record_calls

VERIFIER = Path(__file__).resolve().parents[1] / "examples" / "ledger_verifier.py"
# What no content of an entry may be hashed differently by the verifier than by Prism: text in several scripts,
# floats whose text differs between orjson and Python, nesting.
AWKWARD_DETAIL: dict[str, Any] = {
    "status": 200, "cost": 0.000025, "tiny": 1e-7, "huge": 1.5e300, "round": 100.0, "negative": -2.5e-9,
    "note": "Zürich \u2013 東京 😀 \"quoted\" \\ \u2028", "nested": {"b": [1, 2.5, {"z": None, "a": True}], "a": {}},
}


# --- running things ------------------------------------------------------------------------------

def prism(database_url: str, *args: str) -> CliResult:
    result = run_cli("audit", *args, database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    return result


def document(database_url: str, *args: str) -> dict[str, Any]:
    result = prism(database_url, *args)
    assert result.returncode == 0, str(result)
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def refusal(database_url: str, *args: str) -> str:
    """The error code of a command that must fail cleanly (exit 1, JSON error, no traceback)."""
    result = prism(database_url, *args, "--json")
    assert result.returncode == 1, str(result)
    assert set(result.error) == {"error", "message"} and result.error["message"], str(result)
    code: str = result.error["error"]
    return code


def verifier(*args: str | Path, public_key: str | None = None) -> subprocess.CompletedProcess[str]:
    """`examples/ledger_verifier.py`, run as its own process: only the standard library and `cryptography`."""
    return subprocess.run([sys.executable, "-I", str(VERIFIER), *map(str, args),
                           "--public-key", public_key or ledger_keys().public_key_b64],
                          capture_output=True, text=True, timeout=60, check=False)


def accepted(*args: str | Path) -> str:
    done = verifier(*args)
    assert done.returncode == 0 and done.stdout.startswith("OK: "), done
    return done.stdout


def rejected(*args: str | Path) -> str:
    done = verifier(*args)
    assert done.returncode == 1 and done.stdout.startswith("FAILED: "), done
    assert TRACEBACK not in done.stderr and len(done.stdout.strip().splitlines()) == 1, done
    return done.stdout


def saved(path: Path, value: Any) -> Path:
    path.write_bytes(orjson.dumps(value))
    return path


# --- writing entries -----------------------------------------------------------------------------

async def write_entries(db: Database, ws: Workspace, count: int, *, detail: dict[str, Any] | None = None,
                        age: timedelta = timedelta(0)) -> None:
    """`count` entries written as the ledger writer writes them (content hash, MAC of it and the id), then sealed:
    calls without the HTTP round trips, for logs longer than a few calls or with chosen details and ages."""
    at = utcnow() - age
    rows = []
    for number in range(count):
        draft = EntryDraft(ws.org.id, ws.tenant.id, at, None, None, "rest", "prism_entity_crud",
                           f"entity_crud/spare_parts/spare_part/read/{number}", "0" * 64, "allowed", None,
                           detail if detail is not None else {"status": 200, "cost": 0})
        row = content_of(draft)
        digest = content_hash(row)
        rows.append({**row, "created_at": at, "entry_hash": digest})
    async with db.write() as session:
        await insert_waiting(session, rows)
    await seal_waiting(db, ws.org.id)


@pytest.fixture(name="ws")
async def ws_fixture(client: httpx.AsyncClient, factory: Factory) -> Workspace:
    """A tenant whose log holds N real calls and 14 more entries: 21, so audit paths have several levels."""
    workspace = await factory.workspace(roles=("owner", "viewer"))
    await record_calls(client, workspace.headers)
    await seal_waiting(factory.db, workspace.org.id)
    await write_entries(factory.db, workspace, 14)
    return workspace


def checkpoint_file(database_url: str, ws: Workspace, path: Path) -> Path:
    return saved(path, document(database_url, "checkpoint", "--tenant", ws.tenant.subdomain))


# --- inclusion -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seq", [1, N, N + 14])
async def test_an_entry_s_inclusion_proof_verifies_without_prism(
        database_url: str, ws: Workspace, tmp_path: Path, seq: int) -> None:
    proof = document(database_url, "prove", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--seq", str(seq))
    assert proof["entry"]["seq"] == seq and proof["tree_size"] == N + 14
    assert proof["checkpoint"]["tree_size"] == N + 14 and proof["checkpoint"]["origin"] == f"prism.audit/{ws.org.id}"
    assert proof["entry"]["entry_hash"] == content_hash(proof["entry"]["content"])
    assert verify_inclusion(seq - 1, N + 14, bytes.fromhex(proof["leaf"]),
                            [bytes.fromhex(h) for h in proof["audit_path"]], bytes.fromhex(proof["checkpoint"]["root"]))
    assert f"entry {seq} is in the signed tree of {N + 14} entries" in accepted(
        "inclusion", saved(tmp_path / "proof.json", proof))


async def test_an_entry_with_floats_and_non_ascii_text_verifies_without_prism(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    await write_entries(db, ws, 1, detail=AWKWARD_DETAIL)
    proof = document(database_url, "prove", "--tenant", ws.tenant.subdomain, "--seq", str(N + 15))
    assert proof["entry"]["content"]["detail"] == AWKWARD_DETAIL
    accepted("inclusion", saved(tmp_path / "proof.json", proof))


def _tampered_proofs(proof: dict[str, Any]) -> dict[str, dict[str, Any]]:
    entry, content, signed = proof["entry"], proof["entry"]["content"], proof["checkpoint"]
    path, flipped = proof["audit_path"], "allowed" if content["outcome"] == "refused" else "refused"
    return {
        "outcome of the entry": {**proof, "entry": {**entry, "content": {**content, "outcome": flipped}}},
        "the entry's detail": {**proof, "entry": {**entry, "content": {**content, "detail": {"status": 500}}}},
        "the entry's hash": {**proof, "entry": {**entry, "entry_hash": "a" * 64}},
        "the entry's position": {**proof, "entry": {**entry, "seq": entry["seq"] + 1}},
        "an audit path element": {**proof, "audit_path": ["0" * 64, *path[1:]]},
        "the audit path cut short": {**proof, "audit_path": path[:-1]},
        "the checkpoint's root": {**proof, "checkpoint": {**signed, "root": "b" * 64}},
        "the checkpoint's size": {**proof, "checkpoint": {**signed, "tree_size": signed["tree_size"] + 1}},
        "the checkpoint's signature": {**proof, "checkpoint": {**signed, "signature": "A" * 86 + "=="}},
    }


async def test_a_tampered_proof_entry_or_checkpoint_is_rejected(
        database_url: str, ws: Workspace, tmp_path: Path) -> None:
    proof = document(database_url, "prove", "--tenant", ws.tenant.subdomain, "--seq", "3")
    accepted("inclusion", saved(tmp_path / "proof.json", proof))
    for number, (case, forged) in enumerate(_tampered_proofs(proof).items()):
        assert rejected("inclusion", saved(tmp_path / f"forged{number}.json", forged)), case
    other_key = verifier("inclusion", tmp_path / "proof.json", public_key="A" * 43 + "=")
    assert other_key.returncode == 1 and "signature does not verify" in other_key.stdout, other_key


async def test_a_proof_against_an_older_exported_checkpoint(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    old = checkpoint_file(database_url, ws, tmp_path / "old.json")
    await write_entries(db, ws, 5)
    proof = document(database_url, "prove", "--tenant", ws.tenant.subdomain, "--seq", "20", "--checkpoint", str(old))
    assert proof["tree_size"] == N + 14 and proof["checkpoint"] == {
        k: v for k, v in json.loads(old.read_text()).items() if k != "frontier"}
    accepted("inclusion", saved(tmp_path / "proof.json", proof))
    # An entry sealed after that checkpoint is not in its tree.
    assert refusal(database_url, "prove", "--tenant", ws.tenant.subdomain, "--seq", str(N + 15),
                   "--checkpoint", str(old)) == "entry_not_found"


# --- consistency ---------------------------------------------------------------------------------

async def test_the_current_head_extends_an_older_checkpoint(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    old = checkpoint_file(database_url, ws, tmp_path / "old.json")
    await write_entries(db, ws, 11)
    proof = document(database_url, "consistency", "--tenant", ws.tenant.subdomain, "--from", str(old))
    assert (proof["old_size"], proof["new_size"]) == (N + 14, N + 25)
    assert verify_consistency(N + 14, N + 25, bytes.fromhex(proof["old_checkpoint"]["root"]),
                              bytes.fromhex(proof["checkpoint"]["root"]), [bytes.fromhex(h) for h in proof["proof"]])
    new = saved(tmp_path / "new.json", proof["checkpoint"])
    proof_file = saved(tmp_path / "proof.json", proof)
    accepted("consistency", old, new, proof_file)
    # The verifier checks the proof against the checkpoints it is given, not the ones inside the proof.
    rejected("consistency", new, old, proof_file)
    forged = saved(tmp_path / "forged.json", {**proof, "proof": ["c" * 64, *proof["proof"][1:]]})
    rejected("consistency", old, new, forged)
    other_root = saved(tmp_path / "other_root.json", {**proof["checkpoint"], "root": "d" * 64})
    assert "signature" in rejected("consistency", old, other_root, proof_file)


async def test_no_proof_is_made_from_a_log_that_does_not_match_its_signed_head(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    old = checkpoint_file(database_url, ws, tmp_path / "old.json")
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 4).values(entry_hash="e" * 64))
    tenant = ws.tenant.subdomain
    assert refusal(database_url, "prove", "--tenant", tenant, "--seq", "2") == "log_mismatch"
    assert refusal(database_url, "consistency", "--tenant", tenant, "--from", str(old)) == "log_mismatch"


# --- bad input -----------------------------------------------------------------------------------

async def test_bad_arguments_are_refused_with_a_reason(
        database_url: str, factory: Factory, ws: Workspace, tmp_path: Path) -> None:
    tenant, keys = ws.tenant.subdomain, ledger_keys()
    root = json.loads(checkpoint_file(database_url, ws, tmp_path / "current.json").read_text())["root"]
    too_large = saved(tmp_path / "large.json", sign_checkpoint(keys, ws.org.id, N + 99, root, iso(utcnow())).as_dict())
    other = await factory.workspace(roles=("owner",))
    of_other_log = checkpoint_file(database_url, other, tmp_path / "other.json")
    unsigned = saved(tmp_path / "unsigned.json", {**json.loads(of_other_log.read_text()), "origin":
                                                  f"prism.audit/{ws.org.id}"})
    (tmp_path / "not.json").write_text("{not json")
    cases = {
        ("prove", "--seq", "0"): "entry_not_found",
        ("prove", "--seq", str(N + 15)): "entry_not_found",
        ("prove", "--seq", "1", "--checkpoint", str(tmp_path / "missing.json")): "invalid_arguments",
        ("prove", "--seq", "1", "--checkpoint", str(tmp_path / "not.json")): "invalid_arguments",
        ("prove", "--seq", "1", "--checkpoint", str(too_large)): "checkpoint_too_large",
        ("prove", "--seq", "1", "--checkpoint", str(of_other_log)): "wrong_log",
        ("prove", "--seq", "1", "--checkpoint", str(unsigned)): "bad_signature",
        ("consistency", "--from", str(of_other_log)): "wrong_log",
        ("consistency", "--from", str(tmp_path / "not.json")): "invalid_arguments",
        ("prove", "--org", other.org.id, "--seq", "1"): "organization_not_found",  # another tenant's organization
    }
    for args, code in cases.items():
        assert refusal(database_url, args[0], "--tenant", tenant, *args[1:]) == code, args
    # verify's exit 1 means a broken log: a file it cannot use is a usage error, exit 2
    # (tests/test_audit_cli_verify_checkpoint_files.py)
    for option, file in (("--since", "missing.json"), ("--checkpoint", "not.json")):
        result = prism(database_url, "verify", "--tenant", tenant, option, str(tmp_path / file), "--json")
        assert result.returncode == 2 and result.error["error"] == "invalid_arguments", str(result)


# --- canonical JSON ------------------------------------------------------------------------------

def test_the_verifier_s_canonical_json_is_prism_s() -> None:
    """Prism hashes orjson's sorted-keys output; the verifier writes it with the standard library. Same bytes for
    text in any script, nesting, and floats of every magnitude (where Python's own json.dumps differs)."""
    spec = importlib.util.spec_from_file_location("ledger_verifier", VERIFIER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = random.Random(7)
    floats = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 20) for _ in range(20_000)]
    floats += [struct.unpack("d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20_000)]
    floats = [f for f in floats if f == f and abs(f) != float("inf")]
    values: list[Any] = [AWKWARD_DETAIL, {"é": 1, "z": 2, "😀": 3, "\uffff": 4, "Z": 5, "": [None]}, floats]
    for value in values:
        assert module.canonical_json(value) == orjson.dumps(value, option=CANONICAL)
    assert json.dumps(2.5e-05) != orjson.dumps(2.5e-05).decode()  # why the verifier writes floats itself
