"""ledger: the audit ledger through the API — entries by filter, one entry, verification, export."""
