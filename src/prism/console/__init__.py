"""The console (/console/ on a tenant host): the pages where people in the loop work — oversight, the ledger."""
