"""The ledger's keys, derived from the master secret (prism.kit.secret) and never stored in the database.

- Each organization's MAC key: an entry's MAC is HMAC-SHA256(key, position ‖ content hash), position 0 when
  the entry is written and its place in the log once sealed. A database writer who alters, moves or swaps
  entries cannot make their MACs fit, and one organization's entries do not verify as another's.
- One Ed25519 signing key for the deployment: it signs every tree head. Its public key is what receivers of
  `audit.checkpoint` events and `examples/ledger_verifier.py` check signatures with (`prism audit public-key`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from prism.config import Settings
from prism.kit.secret import derived_key, same_secret


class LedgerKeys:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._signing_key = Ed25519PrivateKey.from_private_bytes(derived_key(settings, "audit-checkpoint-signing"))
        self.public_key: Ed25519PublicKey = self._signing_key.public_key()
        raw = self.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_key_b64 = base64.b64encode(raw).decode()
        self.key_id = hashlib.sha256(raw).hexdigest()[:8]
        self._mac_keys: dict[str, bytes] = {}
        # Per organization, the head this process last signed, as it stored it (checkpoint, size, root, frontier,
        # chain length): a head read back unchanged is known to match its signature (prism.ledger.sealer).
        self.signed_heads: dict[str, tuple[Any, ...]] = {}

    def mac(self, organization_id: str, seq: int, entry_hash: str) -> str:
        """The MAC of the entry with content hash `entry_hash` at position `seq` (0: not yet sealed)."""
        key = self._mac_keys.get(organization_id)
        if key is None:
            key = self._mac_keys[organization_id] = derived_key(self._settings, f"audit-entry-mac:{organization_id}")
        return hmac.digest(key, seq.to_bytes(8, "big") + bytes.fromhex(entry_hash), "sha256").hex()

    def mac_fits(self, organization_id: str, seq: int, entry_hash: str, mac: str | None) -> bool:
        return mac is not None and same_secret(mac, self.mac(organization_id, seq, entry_hash))

    def sign(self, message: bytes) -> bytes:
        return self._signing_key.sign(message)
