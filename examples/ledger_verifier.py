#!/usr/bin/env python3
"""Check Prism audit-ledger documents without Prism: Python's standard library and `cryptography` only.

    ledger_verifier.py checkpoint CHECKPOINT.json --public-key B64
    ledger_verifier.py inclusion PROOF.json --public-key B64           # from `prism audit prove`
    ledger_verifier.py consistency OLD.json NEW.json PROOF.json --public-key B64   # `prism audit consistency`
    ledger_verifier.py archive ARCHIVE.jsonl --public-key B64          # from `prism audit archive`
    ledger_verifier.py archive ARCHIVE.jsonl --checkpoint CP.json --public-key B64   # and a checkpoint within it

The public key is the deployment's checkpoint signing key (`prism audit public-key`), obtained from Prism's
operators by a channel you trust. Prints `OK: ...` and exits 0, or `FAILED: <reason>` and exits 1.

Every field read is taken only with the type Prism writes, never converted: a position or size is a JSON
integer (not `true`, which Python counts as 1, not `1.0`, not `"1"`) from 0 or 1 to 2^63 - 1; a hash is 64
lowercase hex digits (not upper case, not with spaces, which `bytes.fromhex` would take); text is a string. A
document that is not strict JSON (NaN, Infinity, an object with the same key twice, which parsers read
differently) is refused too. A document that means anything other than what Prism wrote is refused, never read
as something close to it.

What is recomputed, as Prism computes it:
- entry_hash = SHA-256(canonical JSON of the entry's content); an entry of the hash chain kept from before the
  tree (it has `prev_hash`): SHA-256(prev_hash as text ‖ canonical JSON of the content with its `seq`);
- leaf = SHA-256(0x00 ‖ seq as 8 bytes big-endian ‖ entry_hash), node = SHA-256(0x01 ‖ left ‖ right) (RFC 9162);
- a checkpoint's signature: Ed25519 over "origin\\nsize\\nbase64(root)\\ntime <timestamp>\\n".

Canonical JSON is Prism's (orjson with sorted keys): keys sorted, no whitespace, UTF-8 unescaped. It equals
`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` except for floats: orjson
writes 0.00001 <= |x| < 0.0001 in plain decimals (`0.000025`, Python `2.5e-05`) and smaller exponents without a
leading zero (`1e-7`, Python `1e-07`). `canonical_json` below writes floats orjson's way. (Non-finite floats
never reach a stored entry: orjson writes them as null.)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ORIGIN_PREFIX = "prism.audit/"
EMPTY_ROOT = hashlib.sha256(b"").digest()
MAX_POSITION = 2**63 - 1  # a position's column is a BIGINT; a leaf hashes it as 8 bytes
HASH_TEXT = re.compile(r"[0-9a-f]{64}")


class Failed(Exception):
    """A check did not pass; the message says which."""


# --- canonical JSON and the entry hash ---------------------------------------------------------

def canonical_json(value: Any) -> bytes:
    return _canonical(value).encode()


def _canonical(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(_string(k) + ":" + _canonical(value[k]) for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    return json.dumps(value)  # int, bool, None


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise Failed("an object key is not a string")
    return json.dumps(value, ensure_ascii=False)


def _float(value: float) -> str:
    text = repr(value)  # the shortest digits that read back as the same float: the digits orjson writes too
    if "e-" not in text:
        return text
    mantissa, exponent = text.split("e")
    if int(exponent) == -5:
        return ("-" if value < 0 else "") + "0.0000" + mantissa.lstrip("-").replace(".", "")
    return f"{mantissa}e{int(exponent)}"


def entry_hash_of(entry: dict[str, Any], seq: int) -> str:
    content = entry.get("content")
    if not isinstance(content, dict):
        raise Failed(f"entry {seq}: its 'content' is missing or not a JSON object")
    if "prev_hash" in entry:
        body = canonical_json({**content, "seq": seq})
        return hashlib.sha256(hash_text(entry["prev_hash"], f"entry {seq}'s prev_hash").encode() + body).hexdigest()
    return hashlib.sha256(canonical_json(content)).hexdigest()


# --- the Merkle tree (RFC 9162) ----------------------------------------------------------------

def leaf_hash(seq: int, entry_hash: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + seq.to_bytes(8, "big") + entry_hash).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Frontier:
    """The roots of the perfect subtrees a tree of `size` leaves is made of, largest first."""

    def __init__(self, size: int = 0, subtrees: Sequence[bytes] = ()) -> None:
        if len(subtrees) != size.bit_count():
            raise Failed(f"a frontier of {size} leaves has {size.bit_count()} hashes, not {len(subtrees)}")
        self.size, self.subtrees = size, list(subtrees)

    def append(self, leaf: bytes) -> None:
        size, node = self.size, leaf
        while size & 1:
            node = node_hash(self.subtrees.pop(), node)
            size >>= 1
        self.subtrees.append(node)
        self.size += 1

    def root(self) -> bytes:
        if not self.subtrees:
            return EMPTY_ROOT
        root = self.subtrees[-1]
        for subtree in reversed(self.subtrees[:-1]):
            root = node_hash(subtree, root)
        return root


def verify_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162, 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162, 2.1.4.2."""
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof
    if old_size > new_size or not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old_root and sr == new_root and sn == 0


# --- checkpoints -------------------------------------------------------------------------------

def check_checkpoint(checkpoint: Any, public_key: Ed25519PublicKey, what: str = "checkpoint") -> dict[str, Any]:
    """The checkpoint, once its fields and its signature are checked."""
    if not isinstance(checkpoint, dict):
        raise Failed(f"the {what} is not a JSON object")
    for name in ("origin", "timestamp", "signature"):
        text(checkpoint, name, f"the {what}'s")
    integer(checkpoint.get("tree_size"), f"the {what}'s 'tree_size'", minimum=0)
    if not checkpoint["origin"].startswith(ORIGIN_PREFIX):
        raise Failed(f"the {what} is not a Prism audit checkpoint (origin {checkpoint['origin']!r})")
    root = hex_bytes(checkpoint.get("root"), f"the {what}'s 'root'")
    note = (f"{checkpoint['origin']}\n{checkpoint['tree_size']}\n{base64.b64encode(root).decode()}\n"
            f"time {checkpoint['timestamp']}\n").encode()
    try:
        public_key.verify(base64.b64decode(checkpoint["signature"], validate=True), note)
    except (InvalidSignature, ValueError) as exc:
        raise Failed(f"the {what}'s signature does not verify with this public key") from exc
    return checkpoint


def shown(value: Any) -> str:
    """A JSON value in a message, cut short."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def integer(value: Any, what: str, *, minimum: int) -> int:
    """A JSON integer from `minimum` to MAX_POSITION: never a bool (an int in Python), a float or a string."""
    if type(value) is not int or not minimum <= value <= MAX_POSITION:
        raise Failed(f"{what} must be an integer from {minimum} to 2^63 - 1, not {shown(value)}")
    return value


def text(document: dict[str, Any], name: str, whose: str) -> str:
    value = document.get(name)
    if not isinstance(value, str):
        raise Failed(f"{whose} {name!r} must be a string, not {shown(value)}")
    return value


def hash_text(value: Any, what: str) -> str:
    """A SHA-256 hash as Prism writes it: 64 lowercase hex digits (bytes.fromhex alone would also take upper case
    and spaces, so one hash could be written several ways)."""
    if not isinstance(value, str) or not HASH_TEXT.fullmatch(value):
        raise Failed(f"{what} must be 64 lowercase hex digits, not {shown(value)}")
    return value


def hex_bytes(value: Any, what: str) -> bytes:
    return bytes.fromhex(hash_text(value, what))


def hex_list(value: Any, what: str) -> list[bytes]:
    if not isinstance(value, list):
        raise Failed(f"{what} is not a list")
    return [hex_bytes(h, f"an element of {what}") for h in value]


def entry_leaf(entry: Any, organization_id: str) -> bytes:
    """The leaf of an entry, after recomputing its hash from its content and checking whose log it is in."""
    if not isinstance(entry, dict):
        raise Failed(f"an entry must be a JSON object, not {shown(entry)}")
    seq = integer(entry.get("seq"), "an entry's 'seq'", minimum=1)
    entry_hash = hash_text(entry.get("entry_hash"), f"entry {seq}'s 'entry_hash'")
    if entry_hash_of(entry, seq) != entry_hash:
        raise Failed(f"entry {seq}: its content does not match its entry_hash")
    if entry["content"].get("organization_id") != organization_id:
        raise Failed(f"entry {seq} belongs to another organization than the checkpoint's log")
    return leaf_hash(seq, bytes.fromhex(entry_hash))


def field(document: dict[str, Any], name: str, kind: type) -> Any:
    value = document.get(name)
    if not isinstance(value, kind):
        raise Failed(f"the document's {name!r} is missing or not a {kind.__name__}")
    return value


# --- the commands ------------------------------------------------------------------------------

def cmd_checkpoint(args: argparse.Namespace, key: Ed25519PublicKey) -> str:
    checkpoint = check_checkpoint(read_json(args.checkpoint), key)
    return f"checkpoint of {checkpoint['tree_size']} entries of {checkpoint['origin']} is signed"


def cmd_inclusion(args: argparse.Namespace, key: Ed25519PublicKey) -> str:
    proof = read_json(args.proof)
    if not isinstance(proof, dict):
        raise Failed("the proof is not a JSON object")
    checkpoint = check_checkpoint(proof.get("checkpoint"), key)
    entry = field(proof, "entry", dict)
    leaf = entry_leaf(entry, checkpoint["origin"].removeprefix(ORIGIN_PREFIX))
    if hash_text(proof.get("leaf"), "the proof's 'leaf'") != leaf.hex():
        raise Failed("the proof's leaf is not the entry's leaf")
    path = hex_list(proof.get("audit_path"), "the audit path")
    if not verify_inclusion(entry["seq"] - 1, checkpoint["tree_size"], leaf, path, bytes.fromhex(checkpoint["root"])):
        raise Failed(f"entry {entry['seq']} is not in the signed tree of {checkpoint['tree_size']} entries")
    return f"entry {entry['seq']} is in the signed tree of {checkpoint['tree_size']} entries of {checkpoint['origin']}"


def cmd_consistency(args: argparse.Namespace, key: Ed25519PublicKey) -> str:
    old = check_checkpoint(read_json(args.old), key, "old checkpoint")
    new = check_checkpoint(read_json(args.new), key, "new checkpoint")
    proof = read_json(args.proof)
    if not isinstance(proof, dict):
        raise Failed("the proof is not a JSON object")
    if old["origin"] != new["origin"]:
        raise Failed("the two checkpoints are of different logs")
    sizes = (integer(proof.get("old_size"), "the proof's 'old_size'", minimum=0),
             integer(proof.get("new_size"), "the proof's 'new_size'", minimum=0))
    if sizes != (old["tree_size"], new["tree_size"]):
        raise Failed("the proof is between other tree sizes than these checkpoints'")
    path = hex_list(proof.get("proof"), "the consistency proof")
    if not verify_consistency(old["tree_size"], new["tree_size"], bytes.fromhex(old["root"]),
                              bytes.fromhex(new["root"]), path):
        raise Failed(f"the tree of {new['tree_size']} entries does not extend the tree of {old['tree_size']}")
    return f"the tree of {new['tree_size']} entries extends the tree of {old['tree_size']} ({new['origin']})"


def cmd_archive(args: argparse.Namespace, key: Ed25519PublicKey) -> str:
    lines = read_lines(args.archive)
    header = next(lines, None)
    if not isinstance(header, dict):
        raise Failed("the archive has no header line")
    checkpoint = check_checkpoint(header.get("checkpoint"), key)
    organization_id = checkpoint["origin"].removeprefix(ORIGIN_PREFIX)
    first = integer(header.get("first_seq"), "the header's 'first_seq'", minimum=1)
    last = integer(header.get("last_seq"), "the header's 'last_seq'", minimum=1)
    if last != checkpoint["tree_size"] or not 1 <= first <= last:
        raise Failed(f"the archive's range {first}..{last} does not end at its checkpoint's size")
    tree = starting_tree(header.get("start"), first, key, checkpoint["origin"])
    trusted = trusted_within(args.checkpoint, key, checkpoint["origin"], first, last)
    seen: dict[str, int] = {}
    for entry in lines:
        leaf = entry_leaf(entry, organization_id)  # its seq is an integer: `true` is not position 1
        if entry["seq"] != tree.size + 1:
            raise Failed(f"entry {tree.size + 1} is missing from the archive")
        if entry["entry_hash"] in seen:  # every entry of a log has a content hash of its own
            raise Failed(f"entries {seen[entry['entry_hash']]} and {entry['seq']} have one content hash: one is a copy")
        seen[entry["entry_hash"]] = entry["seq"]
        tree.append(leaf)
        if trusted is not None and tree.size == trusted["tree_size"] and tree.root().hex() != trusted["root"]:
            raise Failed(f"the archived entries do not make the root of the given checkpoint of {tree.size} entries")
    if tree.size != last:
        raise Failed(f"the archive ends at entry {tree.size}, its header says {last}")
    if tree.root().hex() != checkpoint["root"]:
        raise Failed(f"the archived entries do not make the signed root of the tree of {last} entries")
    frontier = hex_list(header.get("frontier"), "the header's frontier")
    if Frontier(last, frontier).root() != tree.root():
        raise Failed("the header's frontier does not make the signed root")
    also = f", and the given checkpoint of {trusted['tree_size']} entries" if trusted is not None else ""
    return f"entries {first}..{last} of {checkpoint['origin']} make its signed tree of {last} entries{also}"


def trusted_within(path: str | None, key: Ed25519PublicKey, origin: str, first: int, last: int) -> Any:
    """The checkpoint given with --checkpoint, of this log and of a size the archive's entries reach."""
    if path is None:
        return None
    trusted = check_checkpoint(read_json(path), key, "given checkpoint")
    if trusted["origin"] != origin:
        raise Failed(f"the given checkpoint is of {trusted['origin']}, the archive of {origin}")
    if not first <= trusted["tree_size"] <= last:
        raise Failed(f"the given checkpoint ({trusted['tree_size']} entries) is outside the archive's entries "
                     f"{first}..{last}: check it against the archive that holds entry {trusted['tree_size']}")
    return trusted


def starting_tree(start: Any, first: int, key: Ed25519PublicKey, origin: str) -> Frontier:
    """The tree the archive continues: empty from entry 1, else the signed checkpoint (with its frontier) of the
    entries archived before it."""
    if first == 1:
        if start is not None:
            raise Failed(f"the archive starts at entry 1, yet its header's 'start' is {shown(start)}, not null")
        return Frontier()
    if not isinstance(start, dict):
        raise Failed(f"the archive starts at entry {first} but holds no checkpoint of the entries before it")
    earlier = check_checkpoint(start.get("checkpoint"), key, "starting checkpoint")
    if earlier["origin"] != origin or earlier["tree_size"] != first - 1:
        raise Failed("the starting checkpoint is not of this log's first entries before the archive")
    tree = Frontier(first - 1, hex_list(start.get("frontier"), "the starting frontier"))
    if tree.root().hex() != earlier["root"]:
        raise Failed("the starting frontier does not make the starting checkpoint's root")
    return tree


def strict_json(raw: bytes | str) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity (Python's json takes them), no object with a key twice (Python
    keeps the last, other readers the first: two readers of one document would check different values), no lone
    UTF-16 surrogate in a string (Python's json reads `"\\ud800"`; it is not Unicode text, and no Prism wrote it)."""
    value = json.loads(raw, parse_constant=_not_json, object_pairs_hook=_unique_keys)
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate, which is not Unicode text") from None
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"an object has the key {key!r} more than once")
        document[key] = value
    return document


def read_json(path: str) -> Any:
    try:
        return strict_json(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise Failed(f"{path}: not readable JSON ({exc})") from exc


def read_lines(path: str) -> Iterator[Any]:
    try:
        with open(path, "rb") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        yield strict_json(line)
                    except (ValueError, RecursionError) as exc:
                        raise Failed(f"{path}, line {number}: not JSON ({exc})") from exc
    except OSError as exc:
        raise Failed(f"{path}: not readable ({exc})") from exc


def public_key(text: str) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except ValueError as exc:
        raise Failed("--public-key is not a base64 Ed25519 public key (32 bytes)") from exc


COMMANDS: dict[str, Callable[[argparse.Namespace, Ed25519PublicKey], str]] = {
    "checkpoint": cmd_checkpoint, "inclusion": cmd_inclusion, "consistency": cmd_consistency,
    "archive": cmd_archive,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check Prism audit-ledger checkpoints, proofs and archives.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, files in (("checkpoint", ["checkpoint"]), ("inclusion", ["proof"]),
                        ("consistency", ["old", "new", "proof"]), ("archive", ["archive"])):
        command = commands.add_parser(name)
        for file in files:
            command.add_argument(file)
        command.add_argument("--public-key", required=True, help="base64 (`prism audit public-key`)")
        if name == "archive":
            command.add_argument("--checkpoint", help="a checkpoint of this log within the archive's range (one "
                                                      "older than a pruned log's archived entries): the archived "
                                                      "entries must make its root at its size")
    args = parser.parse_args(argv)
    try:
        print("OK: " + COMMANDS[args.command](args, public_key(args.public_key)))
    except Failed as exc:
        print(f"FAILED: {exc}")
        return 1
    except RecursionError:  # content nested deeper than Python recurses: no Prism entry is
        print("FAILED: a document is nested too deeply to be a Prism ledger's")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
