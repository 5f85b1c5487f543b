"""keys: a person's own API keys in an organization — list, mint (console only), revoke."""
