"""The audit ledger: entries written with each call, sealed into a signed Merkle tree per organization."""
