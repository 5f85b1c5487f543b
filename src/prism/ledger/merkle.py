"""The Merkle tree of RFC 9162 (Certificate Transparency 2.0), section 2.1, over SHA-256.

    leaf  = SHA-256(0x00 ‖ data)          node = SHA-256(0x01 ‖ left ‖ right)

An organization's log is such a tree over its sealed entries. Appending needs only the frontier: the roots of
the perfect subtrees the tree is made of, largest first (one per set bit of its size), so a seal costs about
two hashes per entry whatever the log's size. Proofs are computed from the leaves (the archive, the export);
their verification is the RFC's algorithm, the same one `examples/ledger_verifier.py` implements.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(seq: int, entry_hash: bytes) -> bytes:
    """The leaf of the entry at position `seq` (1-based): its position is part of what the tree commits to."""
    return hashlib.sha256(b"\x00" + seq.to_bytes(8, "big") + entry_hash).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Frontier:
    """A tree that can be appended to and asked for its root, holding O(log n) hashes."""

    __slots__ = ("size", "subtrees")

    def __init__(self, size: int = 0, subtrees: Sequence[bytes] = ()) -> None:
        if len(subtrees) != size.bit_count():
            raise ValueError(f"a tree of {size} leaves has {size.bit_count()} perfect subtrees, not {len(subtrees)}")
        self.size = size
        self.subtrees = list(subtrees)

    def append(self, leaf: bytes) -> None:
        # Adding a leaf carries like adding 1 in binary: each trailing set bit of the size merges two subtrees.
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

    def to_hex(self) -> list[str]:
        return [h.hex() for h in self.subtrees]

    @classmethod
    def from_hex(cls, size: int, subtrees: Sequence[str]) -> Frontier:
        return cls(size, [bytes.fromhex(h) for h in subtrees])


def tree_root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of RFC 9162."""
    n = len(leaves)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return leaves[0]
    k = _split(n)
    return node_hash(tree_root(leaves[:k]), tree_root(leaves[k:]))


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]): the audit path of the leaf at 0-based `index`."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf {index} is not in a tree of {n} leaves")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*inclusion_proof(index, leaves[:k]), tree_root(leaves[k:])]
    return [*inclusion_proof(index - k, leaves[k:]), tree_root(leaves[:k])]


def consistency_proof(old_size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]): that the tree of the first `old_size` leaves is a prefix of the tree of all of them."""
    if not 0 < old_size <= len(leaves):
        raise ValueError(f"no consistency proof from size {old_size} to {len(leaves)}")
    return _subproof(old_size, leaves, complete=True)


def _subproof(m: int, leaves: Sequence[bytes], *, complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [tree_root(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], complete=complete), tree_root(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], complete=False), tree_root(leaves[:k])]


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162, 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
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
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is itself a node of the new tree
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
