"""Signed tree heads ("checkpoints"): what a log commits to, in a form anyone with the public key can check.

A checkpoint is JSON: `origin` (`prism.audit/<organization id>`), `tree_size`, `root` (hex), `timestamp`,
`key_id` and `signature`: Ed25519, base64, over the checkpoint's note text

    prism.audit/<organization id>\\n<tree size>\\n<root, base64>\\ntime <timestamp>\\n

(the C2SP `tlog-checkpoint` body with one extension line). The organization is in the signed text, so a
head cannot be moved to another organization's log.
"""

from __future__ import annotations

import base64
import re
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from prism.ledger.keys import LedgerKeys

ORIGIN_PREFIX = "prism.audit/"
_HASH_TEXT = re.compile(r"[0-9a-f]{64}")
# What an unsigned head means, and the one step that signs it (docs/audit.md "Upgrading from the hash chain").
UNSIGNED_HEAD_HINT = ("a log written before signed heads is signed by the upgrade that brings it across; if that "
                      "upgrade stopped before it sealed, `prism audit seal --sign-unsigned-heads` finishes it. At "
                      "any other time an unsigned head was stripped of its signature")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    origin: str
    tree_size: int
    root: str
    timestamp: str
    key_id: str
    signature: str

    @property
    def organization_id(self) -> str:
        return self.origin.removeprefix(ORIGIN_PREFIX)

    def to_json(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def verifies(self, public_key: Ed25519PublicKey) -> bool:
        try:
            public_key.verify(base64.b64decode(self.signature), note_text(self.origin, self.tree_size, self.root,
                                                                          self.timestamp))
        except (InvalidSignature, ValueError):
            return False
        return True


def note_text(origin: str, tree_size: int, root_hex: str, timestamp: str) -> bytes:
    root_b64 = base64.b64encode(bytes.fromhex(root_hex)).decode()
    return f"{origin}\n{tree_size}\n{root_b64}\ntime {timestamp}\n".encode()


def sign_checkpoint(keys: LedgerKeys, organization_id: str, tree_size: int, root_hex: str,
                    timestamp: str) -> Checkpoint:
    origin = ORIGIN_PREFIX + organization_id
    signature = keys.sign(note_text(origin, tree_size, root_hex, timestamp))
    return Checkpoint(origin, tree_size, root_hex, timestamp, keys.key_id, base64.b64encode(signature).decode())


class MalformedCheckpoint(ValueError):
    pass


def parse_checkpoint(text: str | bytes | dict[str, Any]) -> Checkpoint:
    """A checkpoint from its JSON (or the parsed object); MalformedCheckpoint names what is wrong."""
    try:
        data = text if isinstance(text, dict) else orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MalformedCheckpoint(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedCheckpoint("a checkpoint is a JSON object")
    fields = {"origin": str, "tree_size": int, "root": str, "timestamp": str, "key_id": str, "signature": str}
    for name, kind in fields.items():
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            raise MalformedCheckpoint(f"field {name!r} is missing or not a {kind.__name__}")
    if not data["origin"].startswith(ORIGIN_PREFIX) or data["tree_size"] < 0:
        raise MalformedCheckpoint("not a Prism ledger checkpoint (origin or tree_size)")
    # As Prism writes it: the signature covers the root's bytes, but the log is compared with its text, so a root
    # in upper case (or with spaces, which bytes.fromhex takes) would verify and then match no tree.
    if not _HASH_TEXT.fullmatch(data["root"]):
        raise MalformedCheckpoint("root is not 64 lowercase hex digits")
    return Checkpoint(**{name: data[name] for name in fields})
