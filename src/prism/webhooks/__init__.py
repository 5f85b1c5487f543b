"""Signed webhooks: management API, matching, delivery workers, admin page (docs/webhooks.md)."""
