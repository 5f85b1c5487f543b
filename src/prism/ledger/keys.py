"""The ledger's keys, derived from the master secret (prism.kit.secret) and never stored in the database.

- Each organization's MAC key: a sealed entry's MAC is HMAC-SHA256(key, position ‖ content hash). An entry
  waiting to be sealed has HMAC-SHA256(key, 0 ‖ content hash ‖ row id): the id is unique and gives the order in
  which the sealer places waiting entries, so a waiting row copied, or two swapped, no longer fit their MACs. A
  database writer who alters, moves, copies or swaps entries cannot make their MACs fit, and one organization's
  entries do not verify as another's. The same key attests a prune (`prune_mac`): which entries were archived,
  and the signed checkpoint verification starts from after them. The three inputs differ in length (40, 48 and
  58 bytes), so no MAC of one kind fits as another.
- Each organization's entry-id key: what an entry's id is outside the database. `audit_entries.id` is one
  sequence for the deployment (entries are numbered as they are written, with no counter per organization that
  every call of it would queue on: prism.ledger.writer), so two of an organization's ids shown as they are would
  tell how many calls every other tenant made between them. The API, the console, exports and reports show the id
  encrypted under the organization's key instead (`entry_ref`): one AES block of the id and eight zero bytes,
  opaque, the same each time, and, decrypted under another organization's key, not an id at all (the zero bytes
  do not come back). Positions (`seq`) are the organization's own and shown as they are.
- One Ed25519 signing key for the deployment: it signs every tree head. Its public key is what receivers of
  `audit.checkpoint` events and `examples/ledger_verifier.py` check signatures with (`prism audit public-key`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from prism.config import Settings
from prism.kit.secret import derived_key, same_secret

_PRUNE_TAG = b"prism.audit.prune\x00"  # 18 bytes: a prune's MAC input is 58 bytes long, an entry's 40 or 48
_REF_CHECK = bytes(8)  # the second half of an entry reference's block
ENTRY_REF_LENGTH = 32  # hex digits: one AES block


class LedgerKeys:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._signing_key = Ed25519PrivateKey.from_private_bytes(derived_key(settings, "audit-checkpoint-signing"))
        self.public_key: Ed25519PublicKey = self._signing_key.public_key()
        raw = self.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_key_b64 = base64.b64encode(raw).decode()
        self.key_id = hashlib.sha256(raw).hexdigest()[:8]
        self._mac_keys: dict[str, bytes] = {}
        self._ref_ciphers: dict[str, Cipher[Any]] = {}
        # Per organization, the head this process last signed, as it stored it (checkpoint, size, root, frontier,
        # chain length): a head read back unchanged is known to match its signature (prism.ledger.sealer).
        self.signed_heads: dict[str, tuple[Any, ...]] = {}

    def mac(self, organization_id: str, seq: int, entry_hash: str) -> str:
        """The MAC of the sealed entry with content hash `entry_hash` at position `seq`."""
        return self._hmac(organization_id, seq.to_bytes(8, "big") + bytes.fromhex(entry_hash))

    def mac_fits(self, organization_id: str, seq: int, entry_hash: str, mac: str | None) -> bool:
        return mac is not None and same_secret(mac, self.mac(organization_id, seq, entry_hash))

    def waiting_mac(self, organization_id: str, entry_id: int, entry_hash: str) -> str:
        """The MAC of an entry not yet sealed: its content hash and its row id (position 0)."""
        return self._hmac(organization_id, bytes(8) + bytes.fromhex(entry_hash) + entry_id.to_bytes(8, "big"))

    def waiting_mac_fits(self, organization_id: str, entry_id: int, entry_hash: str, mac: str | None) -> bool:
        try:
            return mac is not None and same_secret(mac, self.waiting_mac(organization_id, entry_id, entry_hash))
        except (ValueError, OverflowError):  # a hash that is not hex, an id out of range: rewritten
            return False

    def prune_mac(self, organization_id: str, pruned_through: int, start_root: str) -> str:
        """What attests a prune: entries 1..`pruned_through` were archived, and the log goes on from the signed
        checkpoint of that size, whose root is `start_root`."""
        return self._hmac(organization_id, _PRUNE_TAG + pruned_through.to_bytes(8, "big") + bytes.fromhex(start_root))

    def prune_mac_fits(self, organization_id: str, pruned_through: int, start_root: str, mac: str | None) -> bool:
        try:
            return mac is not None and same_secret(mac, self.prune_mac(organization_id, pruned_through, start_root))
        except (ValueError, OverflowError):
            return False

    def entry_ref(self, organization_id: str, entry_id: int) -> str:
        """The id of the organization's entry `entry_id` as the API and the console show it."""
        encryptor = self._ref_cipher(organization_id).encryptor()
        return (encryptor.update(entry_id.to_bytes(8, "big") + _REF_CHECK) + encryptor.finalize()).hex()

    def entry_id_of(self, organization_id: str, ref: str) -> int | None:
        """The row id `ref` stands for in the organization's log; None for a reference that is not one of its
        own (another organization's, or made up)."""
        try:
            block = bytes.fromhex(ref)
        except ValueError:
            return None
        if len(block) != ENTRY_REF_LENGTH // 2:
            return None
        decryptor = self._ref_cipher(organization_id).decryptor()
        plain = decryptor.update(block) + decryptor.finalize()
        return int.from_bytes(plain[:8], "big") if plain[8:] == _REF_CHECK else None

    def _ref_cipher(self, organization_id: str) -> Cipher[Any]:
        cipher = self._ref_ciphers.get(organization_id)
        if cipher is None:
            key = derived_key(self._settings, f"audit-entry-id:{organization_id}", length=16)
            # One block of a permutation keyed per organization is the whole point, so ECB is the mode that fits.
            cipher = self._ref_ciphers[organization_id] = Cipher(algorithms.AES(key), modes.ECB())  # noqa: S305
        return cipher

    def _hmac(self, organization_id: str, message: bytes) -> str:
        key = self._mac_keys.get(organization_id)
        if key is None:
            key = self._mac_keys[organization_id] = derived_key(self._settings, f"audit-entry-mac:{organization_id}")
        return hmac.digest(key, message, "sha256").hex()

    def sign(self, message: bytes) -> bytes:
        return self._signing_key.sign(message)
