"""Helpers that know no domain."""
